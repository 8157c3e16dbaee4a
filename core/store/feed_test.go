package store

import "testing"

func TestFeedCoalescesAndSkipsWhatIsNotNewer(t *testing.T) {
	t.Parallel()
	f := NewFeed(5)
	ch, unsub := f.Subscribe()
	f.Publish(4) // older than what was announced: nothing
	f.Publish(5)
	select {
	case v := <-ch:
		t.Fatalf("got %d for numbers not newer than 5", v)
	default:
	}
	f.Publish(6)
	f.Publish(8) // a slow reader sees the newest only
	if v := <-ch; v != 8 {
		t.Fatalf("got %d, want 8", v)
	}
	unsub()
	if _, ok := <-ch; ok {
		t.Fatal("the channel is open after unsubscribing")
	}
	other, _ := f.Subscribe()
	if !f.Close() || f.Close() {
		t.Fatal("Close reports wrongly whether it closed the feed")
	}
	if _, ok := <-other; ok {
		t.Fatal("Close left a channel open")
	}
	late, _ := f.Subscribe()
	if _, ok := <-late; ok {
		t.Fatal("a subscription after Close is open")
	}
}
