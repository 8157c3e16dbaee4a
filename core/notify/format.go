package notify

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// Payload is the body of a json delivery: the event as the event API
// shows it, and a link to its page in the web UI.
type Payload struct {
	wire.Event
	URL string `json:"url"`
}

// MessageID is the webhook-id of the delivery of event seq to a
// destination: the same at every try, so that receivers can drop repeats.
func MessageID(seq int64, destination string) string {
	return "msg_" + strconv.FormatInt(seq, 10) + "_" + destination
}

// PageURL is the web UI page of e under publicURL (the core's public
// address): its run, its action, its schedule (a schedule waiting for
// approval, say), else the events page.
func PageURL(publicURL string, e *store.Event) string {
	base := strings.TrimRight(publicURL, "/") + "/ui/"
	schedule, _ := e.Data["schedule"].(string)
	switch {
	case e.RunID != "":
		return base + "runs/" + url.PathEscape(e.RunID)
	case e.ActionID != "":
		return base + "actions/" + url.PathEscape(e.ActionID)
	case schedule != "":
		return base + "schedules/" + url.PathEscape(schedule)
	}
	return base + "events"
}

// Body returns the body of a delivery of e in format.
func Body(format, publicURL string, e *store.Event) ([]byte, error) {
	link := PageURL(publicURL, e)
	if format == FormatSlack {
		return json.Marshal(map[string]string{"text": SlackText(e, link)})
	}
	we := wire.Event{
		Seq: e.Seq, TS: e.TS, Type: e.Type, Actor: e.Actor, ClientAddr: e.ClientAddr,
		ClusterID: e.ClusterID, NodeID: e.NodeID, ActionID: e.ActionID, RunID: e.RunID, Message: e.Message,
		Data: e.Data,
	}
	if format == FormatCloudEvents {
		return json.Marshal(wire.ToCloudEvent(we))
	}
	return json.Marshal(Payload{Event: we, URL: link})
}

// ContentType is the Content-Type of a delivery in format.
func ContentType(format string) string {
	if format == FormatCloudEvents {
		return wire.CloudEventContentType
	}
	return "application/json"
}

// maxText is how much of a text from agents, commands or people a Slack
// line carries.
const maxText = 200

// SlackText is one line: what happened, where, who, and the link. Text
// that came from outside (the message, names) is cut, made printable and
// escaped for Slack's mrkdwn.
func SlackText(e *store.Event, link string) string {
	var b strings.Builder
	b.WriteString(slackEscape(e.Type))
	if msg := strings.Join(strings.Fields(e.Message), " "); msg != "" {
		b.WriteString(": " + slackEscape(cut(msg)))
	}
	var where []string
	for _, p := range []string{e.ClusterID, e.NodeID} {
		if p != "" {
			where = append(where, p)
		}
	}
	if len(where) > 0 {
		b.WriteString(" on " + slackEscape(cut(strings.Join(where, "/"))))
	}
	if e.Actor != "" {
		b.WriteString(" by " + slackEscape(cut(e.Actor)))
	}
	b.WriteString(" <" + slackEscape(link) + "|open>")
	return b.String()
}

func cut(s string) string {
	if r := []rune(s); len(r) > maxText {
		return string(r[:maxText]) + "…"
	}
	return s
}

// slackEscape escapes the three characters Slack's mrkdwn reads (&, <, >)
// and makes control and bidirectional characters visible.
func slackEscape(s string) string {
	s = textsafe.Escape(s)
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Sign sets the Standard Webhooks headers of a delivery: webhook-id,
// webhook-timestamp, webhook-signature (v1, base64 HMAC-SHA256 over
// id.timestamp.body).
func Sign(h http.Header, secret []byte, id string, ts time.Time, body []byte) error {
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return nil
}
