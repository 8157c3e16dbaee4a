package sqlite

import (
	"testing"
	"time"
)

func TestMicrosRoundTrip(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 11, 23, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	got := FromMicros(Micros(local))
	want := time.Date(2026, 11, 23, 2, 4, 5, 123457000, time.UTC) // rounded, in UTC
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("round trip %s, want %s", got, want)
	}
	if Micros(local.Add(time.Microsecond)) <= Micros(local) {
		t.Fatal("a later time is not stored as a larger number")
	}
	if v := NullMicros(nil); v.Valid || FromNullMicros(v) != nil {
		t.Fatal("nil is not NULL")
	}
	if p := FromNullMicros(NullMicros(&local)); p == nil || !p.Equal(want) {
		t.Fatalf("optional round trip %v", p)
	}
}
