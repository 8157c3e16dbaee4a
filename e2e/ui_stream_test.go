package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// holdStreams makes tab hold every request for the live-update stream
// until the test lets it go: the page is rendered and its script has run,
// but its stream is not open yet. It returns the held requests as they
// come and a function that lets one go.
func holdStreams(t *testing.T, tab context.Context) (<-chan fetch.RequestID, func(fetch.RequestID)) {
	t.Helper()
	held := make(chan fetch.RequestID, 16)
	if err := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case held <- e.RequestID:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/ui/stream*"}}}); err != nil {
		t.Fatal(err)
	}
	return held, func(id fetch.RequestID) {
		if _, err := chromedp.Call(tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id}); err != nil {
			t.Errorf("let the stream go: %v", err)
		}
	}
}

// TestWebUIPageSeesWhatCameBeforeItsStream: a change committed after a
// page was rendered but before its live stream opened refreshes the page
// (the stream starts after the event the page was rendered from). The
// Clusters page is rendered with its stream held; a node is drained
// through the API; then the stream opens, and the page shows the node
// drained without being reloaded.
func TestWebUIPageSeesWhatCameBeforeItsStream(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, "")
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	tab := br.tab(t, 1280, 800, "UTC")
	signIn(t, tab, base, "/ui/clusters", f.secrets["alice"])
	waitLoaded(t, tab, "the Clusters page, live", `!!document.querySelector('#main[data-live-open]')`)
	if got := eval[string](t, tab, `(document.querySelector('.drained-line') || {}).textContent || ''`); got != "" {
		t.Fatalf("a node is drained before the test drains one: %q", got)
	}
	held, let := holdStreams(t, tab)
	do(t, tab, chromedp.Navigate(base+"/ui/clusters"))
	var id fetch.RequestID
	select {
	case id = <-held:
	case <-time.After(browserWait):
		t.Fatal("the page never asked for its stream")
	}
	if got := eval[string](t, tab, `document.querySelector('#main').getAttribute('data-live-open') || ''`); got != "" {
		t.Fatal("the stream opened while it was held")
	}
	if _, err := f.alice.DrainNode(ctxT(t), "e2e", "node-2", "disk swap"); err != nil {
		t.Fatal(err)
	}
	let(id)
	defer func() {
		if t.Failed() {
			t.Logf("main: %s", eval[string](t, tab, `document.querySelector('#main').outerHTML.slice(0, 300) + ' status=' + document.querySelector('#live-status').textContent + ' drained=' + ((document.querySelector('.drained-line')||{}).textContent||'')`))
		}
	}()
	waitLoaded(t, tab, "the page refreshed with node-2 drained",
		`(document.querySelector('.drained-line') || {}).textContent.includes('node-2') && document.querySelector('#main').hasAttribute('data-refreshed')`)
}
