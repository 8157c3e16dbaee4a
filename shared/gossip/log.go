package gossip

import (
	"bytes"
	"context"
	"log/slog"
)

// logWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records, one level lower than memberlist's: memberlist reports
// routine events of a changing pool (a probe to a dead member failing) as
// warnings and errors. ERR becomes warn, WARN info, the rest debug; sends
// that fail because this member is shutting down are debug.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelDebug
	for prefix, l := range map[string]slog.Level{"[ERR]": slog.LevelWarn, "[WARN]": slog.LevelInfo} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = l
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	for _, prefix := range []string{"[INFO]", "[DEBUG]"} {
		line = bytes.TrimPrefix(line, []byte(prefix))
	}
	line = bytes.TrimPrefix(bytes.TrimSpace(line), []byte("memberlist: "))
	if bytes.Contains(line, []byte("use of closed network connection")) {
		level = slog.LevelDebug // sends racing this member's own shutdown
	}
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, string(line))
	}
	return len(p), nil
}
