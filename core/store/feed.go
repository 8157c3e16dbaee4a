package store

import "sync"

// Feed hands the newest event sequence number to the subscribers of a store
// (Store.Subscribe): every store implementation announces its commits
// through one.
type Feed struct {
	mu     sync.Mutex
	subs   map[int]chan int64
	next   int
	latest int64
	closed bool
}

// NewFeed returns a feed whose newest sequence number is latest.
func NewFeed(latest int64) *Feed {
	return &Feed{subs: map[int]chan int64{}, latest: latest}
}

// Subscribe returns a channel receiving the newest sequence number after
// every Publish of a newer one. The channel holds one value and coalesces:
// a slow reader sees the latest number. The returned func unsubscribes and
// closes the channel; Close closes every channel left.
func (f *Feed) Subscribe() (<-chan int64, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan int64, 1)
	if f.closed {
		close(ch)
		return ch, func() {}
	}
	id := f.next
	f.next++
	f.subs[id] = ch
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if c, ok := f.subs[id]; ok {
			delete(f.subs, id)
			close(c)
		}
	}
}

// Publish announces seq to every subscriber, unless it is not newer than
// what was announced already (a replica hears its own commits again).
func (f *Feed) Publish(seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.latest {
		return
	}
	f.latest = seq
	for _, ch := range f.subs {
		select { // drop a value the reader has not taken yet: the newest wins
		case <-ch:
		default:
		}
		ch <- seq
	}
}

// Close closes every subscriber's channel, and reports whether this call
// closed the feed (false: it was closed already).
func (f *Feed) Close() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.closed = true
	for id, ch := range f.subs {
		delete(f.subs, id)
		close(ch)
	}
	return true
}
