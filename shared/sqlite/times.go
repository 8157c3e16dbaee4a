package sqlite

import (
	"database/sql"
	"time"
)

// Times are stored as integer microseconds since the Unix epoch in UTC, so
// that ordering by a time column is ordering by time. Micros rounds to the
// microsecond as action.UTC does, so a time read back equals the one written.

// Micros is the stored form of t.
func Micros(t time.Time) int64 { return t.UTC().Round(time.Microsecond).UnixMicro() }

// FromMicros is the inverse of Micros.
func FromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// NullMicros is the stored form of an optional time: NULL for nil.
func NullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: Micros(*t), Valid: true}
}

// FromNullMicros is the inverse of NullMicros.
func FromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := FromMicros(v.Int64)
	return &t
}
