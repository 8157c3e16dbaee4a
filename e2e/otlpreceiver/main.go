// Command otlpreceiver is the end-to-end tests' OTLP/HTTP receiver: it takes
// POST /v1/traces in OTLP protobuf (gzip or not), decodes it with the
// official OTLP packages, and appends each span to a file as one JSON line
// that a test reads. It writes the address it listens on to -addr-file once
// it listens.
package main

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one line of the output file.
type Span struct {
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id"`
	Name         string            `json:"name"`
	Kind         int32             `json:"kind"`
	StartNanos   uint64            `json:"start_unix_nano"`
	EndNanos     uint64            `json:"end_unix_nano"`
	Status       int32             `json:"status_code"`
	Attributes   map[string]string `json:"attributes"`
	Service      string            `json:"service"`
}

func main() {
	out := flag.String("out", "spans.jsonl", "file the spans are appended to")
	addrFile := flag.String("addr-file", "", "file the listening address is written to")
	flag.Parse()
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	http.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = http.MaxBytesReader(w, r.Body, 32<<20)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var lines []byte
		for _, rs := range req.GetResourceSpans() {
			service := attrs(rs.GetResource().GetAttributes())["service.name"]
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					l, _ := json.Marshal(Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
						ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: int32(s.GetKind()),
						StartNanos: s.GetStartTimeUnixNano(), EndNanos: s.GetEndTimeUnixNano(),
						Status: int32(s.GetStatus().GetCode()), Attributes: attrs(s.GetAttributes()), Service: service})
					lines = append(append(lines, l...), '\n')
				}
			}
		}
		mu.Lock()
		_, err = f.Write(lines)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	})
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(*addrFile+".tmp", *addrFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Fatal(http.Serve(ln, nil))
}

// attrs flattens attributes to strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
