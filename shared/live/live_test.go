package live

import (
	"sync"
	"testing"
)

type policy struct {
	TTL   int
	Rules []string
}

func TestLoadReturnsWhatWasStoredLast(t *testing.T) {
	t.Parallel()
	var none *Value[policy]
	if got := none.Load(); got.TTL != 0 || got.Rules != nil {
		t.Errorf("a nil Value loads %+v, want the zero value", got)
	}
	var zero Value[policy]
	if got := zero.Load(); got.TTL != 0 {
		t.Errorf("a zero Value loads %+v, want the zero value", got)
	}
	v := New(policy{TTL: 24})
	kept := v.Load()
	v.Store(policy{TTL: 1})
	if got := v.Load().TTL; got != 1 {
		t.Errorf("Load after Store = %d, want 1", got)
	}
	if kept.TTL != 24 {
		t.Errorf("a loaded copy changed: %d", kept.TTL)
	}
}

// Readers and a writer at once: run with -race.
func TestLoadAndStoreRace(t *testing.T) {
	t.Parallel()
	v := New(policy{TTL: 0})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 1000 {
				if i == 0 {
					v.Store(policy{TTL: j, Rules: []string{"r"}})
				} else {
					_ = v.Load().TTL
				}
			}
		}()
	}
	wg.Wait()
}
