package enroll

import (
	"container/list"
	"sync"
	"time"
	"unicode/utf8"
)

// refusalEvery is how often at most a refusal is written down for one key
// (a join token, a node renewing, or every unknown caller together):
// a refusal costs nothing to send and may be sent without end.
const refusalEvery = time.Minute

// maxRefusalKeys bounds the keys the limiter remembers: a new key past it
// evicts the oldest. An evicted key's next refusal is written down at once
// (so rotating keys can at most make the limiter forget, never grow).
const maxRefusalKeys = 4096

// limiter lets one refusal per key through every `every`; the refusals
// held back in between are counted and folded into the next that passes.
// It is bounded to max keys, the least recently passed evicted first.
type limiter struct {
	every time.Duration
	max   int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *limited
	order *list.List               // front: the oldest pass
}

type limited struct {
	key  string
	last time.Time // when a refusal last passed
	held int       // refusals held back since
}

func newLimiter(every time.Duration, max int) *limiter {
	return &limiter{every: every, max: max, keys: map[string]*list.Element{}, order: list.New()}
}

// allow reports whether a refusal for key at now is written down; when it
// is, count is how many refusals it stands for (itself and those held
// back since the key's last one).
func (l *limiter) allow(key string, now time.Time) (pass bool, count int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.keys[key]; ok {
		e := el.Value.(*limited)
		if now.Sub(e.last) < l.every {
			e.held++
			return false, 0
		}
		count = e.held + 1
		e.last, e.held = now, 0
		l.order.MoveToBack(el)
		return true, count
	}
	for len(l.keys) >= l.max {
		oldest := l.order.Front()
		l.order.Remove(oldest)
		delete(l.keys, oldest.Value.(*limited).key)
	}
	l.keys[key] = l.order.PushBack(&limited{key: key, last: now})
	return true, 1
}

// size is how many keys the limiter remembers.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// maxRefusalReason bounds the reason a refusal's event and log line carry.
const maxRefusalReason = 512

// refusalKey is the limiter's key of a refusal by a known kind ("token",
// "node") and name; "" without a name (an unknown caller).
func refusalKey(kind, name string) string {
	if name == "" {
		return ""
	}
	return kind + ":" + name
}

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
