package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The dev cluster's health (docs/development.md, "Example kinds"): what the
// gates of the shipped playbooks check on `muster dev`. GET /health lists
// "NODE: healthy" or "NODE: unhealthy", a line per node; GET /metrics
// serves muster_dev_error_ratio{node="NODE"}, 0 or 0.5, for a Prometheus
// one runs beside it. A node is unhealthy while the fail file of its
// example health kind (fail/health.NODE) exists: --fail health@node-2 makes
// the canary of canary-upgrade abort.

// devHealthHandler serves the health of nodes, kept in data directory dir.
func devHealthHandler(dir string, nodes []string) http.Handler {
	healthy := func(node string) bool {
		_, err := os.Stat(filepath.Join(dir, "fail", "health."+node))
		return errors.Is(err, os.ErrNotExist)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, n := range nodes {
			state := "healthy"
			if !healthy(n) {
				state = "unhealthy"
			}
			fmt.Fprintf(w, "%s: %s\n", n, state)
		}
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# HELP muster_dev_error_ratio The example error ratio of a dev node (0.5 while fail/health.NODE exists).")
		fmt.Fprintln(w, "# TYPE muster_dev_error_ratio gauge")
		for _, n := range nodes {
			v := "0"
			if !healthy(n) {
				v = "0.5"
			}
			fmt.Fprintf(w, "muster_dev_error_ratio{node=%q} %s\n", n, v)
		}
	})
	return mux
}

// listenDevHealth listens on addr for the dev health endpoint.
func listenDevHealth(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-addr: %w", err)
	}
	return l, nil
}

// serveDevHealth serves h on l until ctx ends.
func serveDevHealth(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
