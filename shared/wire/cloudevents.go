package wire

import (
	"net/url"
	"strconv"
	"time"
)

// CloudEvent is an event of the audit trail in the CloudEvents 1.0 JSON
// envelope (structured mode): what `format: cloudevents` notifications
// post and `muster events -o cloudevents` prints, one rule for both
// (docs/notifications.md, "CloudEvents"). Every attribute is a function of
// the event alone, so a delivery tried again, or an event printed again
// after a restart, is the same CloudEvent: a receiver drops repeats by
// source and id.
type CloudEvent struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject,omitempty"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	// Data is the event as the event API shows it.
	Data Event `json:"data"`
	// MusterSeq is the event's sequence number (an extension attribute):
	// where a reader resumes (`muster events --since`).
	MusterSeq int64 `json:"musterseq"`
}

// CloudEventContentType is the media type of a CloudEvent in structured mode.
const CloudEventContentType = "application/cloudevents+json"

// CloudEventTypePrefix is put before an event's type (action.created is
// io.muster.action.created), as the specification advises a reverse-DNS
// prefix.
const CloudEventTypePrefix = "io.muster."

// ToCloudEvent wraps e: id is its sequence number, source the muster
// cluster it is about (/muster/clusters/<id>, or /muster), type its type
// after CloudEventTypePrefix, subject what it is about (actions/<id>,
// runs/<id>, nodes/<id> or schedules/<id>), time when it happened (UTC,
// RFC 3339).
func ToCloudEvent(e Event) CloudEvent {
	source := "/muster"
	if e.ClusterID != "" {
		source += "/clusters/" + url.PathEscape(e.ClusterID)
	}
	var subject string
	schedule, _ := e.Data["schedule"].(string)
	switch {
	case e.ActionID != "":
		subject = "actions/" + e.ActionID
	case e.RunID != "":
		subject = "runs/" + e.RunID
	case e.NodeID != "":
		subject = "nodes/" + e.NodeID
	case schedule != "":
		subject = "schedules/" + schedule
	}
	return CloudEvent{SpecVersion: "1.0", ID: strconv.FormatInt(e.Seq, 10), Source: source,
		Type: CloudEventTypePrefix + e.Type, Subject: subject, Time: e.TS.UTC().Format(time.RFC3339Nano),
		DataContentType: "application/json", Data: e, MusterSeq: e.Seq}
}
