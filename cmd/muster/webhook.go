package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/shared/textsafe"
)

// maxDelivery bounds the body of a delivery the receiver reads (the core's
// are a few kilobytes).
const maxDelivery = 1 << 20

func newWebhookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Receive the core's signed notifications on this machine",
	}
	var addr, secretFile string
	listen := &cobra.Command{
		Use:   "listen",
		Short: "Serve a webhook receiver that verifies each delivery's signature and prints it",
		Long: `Serve HTTP on --addr and print one line for each delivery of a json or
cloudevents destination (docs/notifications.md): whether its Standard Webhooks
signature verified with the secret of --secret-file, its event type, cluster,
message and link. A verified delivery is answered 204; a bad or missing
signature 401, so the core retries it and shows why. Stop with Ctrl-C.

muster dev writes a secret for it and prints the command line.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret, err := notify.LoadSecret(secretFile)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "muster webhook listen: receiving on http://%s/ (signatures checked with %s)\n", ln.Addr(), secretFile)
			return serveWebhooks(cmd.Context(), ln, secret, cmd.OutOrStdout())
		},
	}
	listen.Flags().StringVar(&addr, "addr", "127.0.0.1:9000", "address to listen on")
	listen.Flags().StringVar(&secretFile, "secret-file", "", "the destination's secret_file (mode 0600)")
	_ = listen.MarkFlagRequired("secret-file")
	cmd.AddCommand(listen)
	return cmd
}

// serveWebhooks answers deliveries on ln until ctx ends, printing a line
// for each to out.
func serveWebhooks(ctx context.Context, ln net.Listener, secret []byte, out io.Writer) error {
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		return err
	}
	var mu sync.Mutex // one line at a time
	print := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UTC().Format(time.RFC3339)
		if r.Method != http.MethodPost {
			http.Error(w, "deliveries are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDelivery))
		if err != nil {
			print("%s refused   a body over %d bytes from %s", now, maxDelivery, r.RemoteAddr)
			http.Error(w, "the body is too large", http.StatusRequestEntityTooLarge)
			return
		}
		id := textsafe.Escape(r.Header.Get("webhook-id"))
		if err := wh.Verify(body, r.Header); err != nil {
			print("%s REFUSED   %s: the signature does not verify (%v): the secret differs, or the delivery is not the core's", now, id, err)
			http.Error(w, "the signature does not verify", http.StatusUnauthorized)
			return
		}
		print("%s verified  %s %s", now, id, describeDelivery(body))
		w.WriteHeader(http.StatusNoContent)
	})}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shut)
		case <-done:
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// describeDelivery is one line of what a delivery says: its event type,
// cluster, node, run or action, message and link, every part escaped (it
// came from agents, commands and people).
func describeDelivery(body []byte) string {
	var d struct {
		Type      string `json:"type"`
		Actor     string `json:"actor"`
		ClusterID string `json:"cluster_id"`
		NodeID    string `json:"node_id"`
		RunID     string `json:"run_id"`
		ActionID  string `json:"action_id"`
		Message   string `json:"message"`
		URL       string `json:"url"`
		// A CloudEvent carries the event under data.
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return "(not JSON: " + textsafe.Escape(cutText(string(body), 80)) + ")"
	}
	if d.Message == "" && len(d.Data) > 0 {
		var inner struct {
			Actor     string `json:"actor"`
			ClusterID string `json:"cluster_id"`
			NodeID    string `json:"node_id"`
			RunID     string `json:"run_id"`
			ActionID  string `json:"action_id"`
			Message   string `json:"message"`
		}
		if json.Unmarshal(d.Data, &inner) == nil {
			d.Actor, d.ClusterID, d.NodeID, d.RunID, d.ActionID, d.Message = inner.Actor, inner.ClusterID, inner.NodeID, inner.RunID, inner.ActionID, inner.Message
		}
	}
	parts := []string{d.Type}
	for _, kv := range [][2]string{{"cluster", d.ClusterID}, {"node", d.NodeID}, {"run", d.RunID}, {"action", d.ActionID}, {"by", d.Actor}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if d.Message != "" {
		parts = append(parts, fmt.Sprintf("%q", cutText(d.Message, 200)))
	}
	if d.URL != "" {
		parts = append(parts, d.URL)
	}
	return textsafe.Escape(strings.Join(parts, " "))
}

// cutText shortens s to at most n runes, marking the cut.
func cutText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
