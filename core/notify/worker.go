package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/startstop"
)

// Limits of a delivery (docs/notifications.md).
const (
	Timeout     = 10 * time.Second
	MaxAnswer   = 64 << 10
	MinBackoff  = time.Second
	MaxBackoff  = time.Hour
	GiveUpAfter = 24 * time.Hour
	// ClientErrorTries: a 4xx answer other than 408 and 429 is given up
	// after this many tries.
	ClientErrorTries = 3
)

// Config configures a Worker.
type Config struct {
	Destinations []Destination
	// PublicURL is the web UI's address as people reach it (ui.public_url).
	PublicURL     string
	AllowLoopback bool
	// Poll bounds how long a destination waits before looking at its
	// queue again without being woken (deliveries enqueued or changed by
	// another replica). Default 2s.
	Poll time.Duration
	// Lease, when set, returns a context that ends when this replica stops
	// holding the outbox, and false while another replica holds it.
	Lease func(ctx context.Context) (context.Context, context.CancelFunc, bool)
	// Timeout of one try; default Timeout. Backoff bounds (MinBackoff,
	// MaxBackoff) may be shortened by tests.
	Timeout    time.Duration
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Linger is how long a destination waits after sending fewer than a
	// batch, so that the next tries are read, sent and recorded together;
	// default 150ms.
	Linger time.Duration
}

// Worker sends the outbox's deliveries. Build it with New, run it with
// Start, end it with Stop; Reload changes its destinations while it runs.
type Worker struct {
	cfg     Config
	st      store.Store
	log     *slog.Logger
	metrics *metrics

	startstop.Base

	mu sync.Mutex
	// dests are the destinations in use, in configuration order;
	// secrets their signing secrets by name; client sends.
	dests         []Destination
	secrets       map[string][]byte
	client        *http.Client
	allowLoopback bool
	// loops are the destinations' loops by name; ended, the done
	// channels of loops of removed destinations (a destination added
	// again waits for its old loop to end: one delivery in flight).
	loops map[string]*destLoop
	ended map[string]<-chan struct{}
	// runCtx is Start's context (nil before Start); stopping is set once
	// the worker stops starting loops.
	runCtx   context.Context
	stopping bool
	wg       sync.WaitGroup
	// retireWake asks for a pass over the deliveries of destinations no
	// longer configured.
	retireWake chan struct{}
	// removed are the destinations this worker saw removed by a reload
	// (and not added again): only their deliveries are made dead. A name
	// merely unknown here may be one another replica has just added.
	removed map[string]bool
	// skipped is, by destination, the event its cursor was last moved
	// to with nothing pending (skip).
	skipped map[string]int64
	// recent keeps the events read lately and their bodies.
	recent *recent
}

// destLoop is the loop of one destination.
type destLoop struct {
	wake   chan struct{}
	cancel context.CancelFunc // nil until started
	done   chan struct{}      // closed when the loop ended; nil until started
	prev   <-chan struct{}    // the loop this one waits for (a removed one)
}

// New builds a worker: it loads the secrets and starts nothing. Its
// metrics go to reg (none when nil).
func New(cfg Config, st store.Store, log *slog.Logger, reg prometheus.Registerer) (*Worker, error) {
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = Timeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = MinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = MaxBackoff
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 150 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secrets, err := loadSecrets(cfg.Destinations)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, st: st, log: log.With("component", "notify"), secrets: secrets,
		dests: slices.Clone(cfg.Destinations), loops: map[string]*destLoop{}, ended: map[string]<-chan struct{}{},
		allowLoopback: cfg.AllowLoopback, retireWake: make(chan struct{}, 1), removed: map[string]bool{}, skipped: map[string]int64{}, recent: newRecent()}
	for _, d := range cfg.Destinations {
		w.loops[d.Name] = &destLoop{wake: make(chan struct{}, 1)}
	}
	w.client = NewClient(cfg.Timeout, cfg.AllowLoopback)
	w.metrics = newMetrics(w, reg)
	return w, nil
}

// loadSecrets reads the secret file of each destination that has one.
func loadSecrets(dests []Destination) (map[string][]byte, error) {
	secrets := map[string][]byte{}
	for _, d := range dests {
		if d.SecretFile == "" {
			continue
		}
		s, err := LoadSecret(d.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("notify %s: secret_file: %w", d.Name, err)
		}
		secrets[d.Name] = s
	}
	return secrets, nil
}

// Change says what a Reload changed, by destination name.
type Change struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Loopback: notify_allow_loopback changed.
	Loopback bool `json:"loopback_changed,omitempty"`
}

// Empty reports a reload that changed nothing.
func (c Change) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Changed) == 0 && !c.Loopback
}

// String is the change in one line, such as "added pager; removed old".
func (c Change) String() string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", c.Added}, {"removed", c.Removed}, {"changed", c.Changed}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	if c.Loopback {
		parts = append(parts, "notify_allow_loopback changed")
	}
	return strings.Join(parts, "; ")
}

// Reload makes dests the destinations the worker delivers to, their secret
// files read again (docs/notifications.md, "Reloading"). A destination
// added gets its loop; one removed has its loop stopped (a try in flight is
// abandoned, not recorded) and its pending deliveries made dead; one
// changed sends its next tries, pending ones too, with its new URL, format
// and secret. An unreadable secret changes nothing and is returned. The
// caller validated dests (Validate) and routes events to them (Route).
func (w *Worker) Reload(dests []Destination, allowLoopback bool) (Change, error) {
	secrets, err := loadSecrets(dests)
	if err != nil {
		return Change{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var ch Change
	old := map[string]Destination{}
	for _, d := range w.dests {
		old[d.Name] = d
	}
	for _, d := range dests {
		o, ok := old[d.Name]
		switch {
		case !ok:
			ch.Added = append(ch.Added, d.Name)
		case !reflect.DeepEqual(o, d) || !bytes.Equal(w.secrets[d.Name], secrets[d.Name]):
			ch.Changed = append(ch.Changed, d.Name)
		}
		delete(old, d.Name)
	}
	for _, d := range w.dests {
		if _, gone := old[d.Name]; gone {
			ch.Removed = append(ch.Removed, d.Name)
		}
	}
	if allowLoopback != w.allowLoopback {
		ch.Loopback = true
		w.client.CloseIdleConnections()
		w.client = NewClient(w.cfg.Timeout, allowLoopback)
		w.allowLoopback = allowLoopback
	}
	w.dests, w.secrets = slices.Clone(dests), secrets
	for _, name := range ch.Removed {
		w.removed[name] = true
		l := w.loops[name]
		delete(w.loops, name)
		if l.cancel != nil {
			l.cancel()
			w.ended[name] = l.done
		}
	}
	for _, name := range ch.Added {
		delete(w.removed, name)
		w.loops[name] = &destLoop{wake: make(chan struct{}, 1), prev: w.ended[name]}
		delete(w.ended, name)
		w.startLoopLocked(name)
	}
	if len(ch.Removed) > 0 {
		select {
		case w.retireWake <- struct{}{}:
		default:
		}
	}
	return ch, nil
}

// dest returns the destination named name, its secret and the client to
// send with (ok false: no longer configured).
func (w *Worker) dest(name string) (d Destination, secret []byte, client *http.Client, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.dests {
		if d.Name == name {
			return d, w.secrets[name], w.client, true
		}
	}
	return Destination{}, nil, w.client, false
}

// NewClient is the HTTP client of deliveries: one timeout per try, no
// proxy, no redirects followed, and unless allowLoopback, no connection to
// a loopback or link-local address (checked when dialling, whatever the
// name resolved to).
func NewClient(timeout time.Duration, allowLoopback bool) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	if !allowLoopback {
		d.Control = gossip.RefuseInternal
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: timeout,
			ResponseHeaderTimeout: timeout, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Start runs one loop per destination and returns at once.
func (w *Worker) Start(ctx context.Context) error {
	ctx, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	feed, unsub := w.st.Subscribe()
	w.mu.Lock()
	w.runCtx = ctx
	for _, d := range w.dests {
		w.startLoopLocked(d.Name)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.leased(ctx, w.retirer)
	}()
	w.mu.Unlock()
	go func() {
		defer done()
		defer func() {
			w.mu.Lock()
			w.stopping = true // no loop starts after this
			w.mu.Unlock()
			w.wg.Wait()
		}()
		defer unsub()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-feed:
				if !ok {
					<-ctx.Done()
					return
				}
				w.Nudge()
			}
		}
	}()
	return nil
}

// startLoopLocked starts the loop of a destination, once the worker runs
// (w.mu held).
func (w *Worker) startLoopLocked(name string) {
	l := w.loops[name]
	if w.runCtx == nil || w.stopping || l == nil || l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.runCtx)
	l.cancel, l.done = cancel, make(chan struct{})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(l.done)
		defer cancel()
		if l.prev != nil {
			select {
			case <-l.prev:
			case <-ctx.Done():
				return
			}
		}
		w.leased(ctx, func(ctx context.Context) { w.loop(ctx, name, l.wake) })
	}()
}

// Nudge wakes every destination's loop to look at its queue.
func (w *Worker) Nudge() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.loops {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// leased runs fn while this replica holds the outbox: fn returns when the
// context it is given ends.
func (w *Worker) leased(ctx context.Context, fn func(ctx context.Context)) {
	for ctx.Err() == nil {
		if w.cfg.Lease == nil {
			fn(ctx)
			return
		}
		lctx, cancel, ok := w.cfg.Lease(ctx)
		if ok {
			fn(lctx)
			cancel()
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.cfg.Poll):
		}
	}
}

func (w *Worker) loop(ctx context.Context, name string, wake <-chan struct{}) {
	for ctx.Err() == nil {
		wait, sent, held, err := w.step(ctx, name)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("delivery failed to be recorded", "destination", name, "err", err)
			wait = w.cfg.Poll
		}
		if sent > 0 && sent < batchSize {
			// Let the next deliveries gather: their tries are then
			// recorded together, one transaction for many events.
			t := time.NewTimer(w.cfg.Linger)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		if wait <= 0 {
			continue
		}
		woken := wake
		if held {
			// The head waits for its next try: new events change
			// nothing until then, so only the timer (or a poll, for a
			// redelivery) ends the wait.
			woken = nil
		}
		t := time.NewTimer(min(wait, w.cfg.Poll))
		select {
		case <-ctx.Done():
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// batchSize bounds the deliveries of a destination read, sent (one after
// the other, in order) and recorded in one step, and stepTime how long a
// step sends before it records what it sent. Under a flood of events,
// fewer and larger transactions take the store's one write lock from the
// event writes less often (docs/performance.md); with a slow receiver a
// step still records within about stepTime (fewer repeats after a crash or
// a lost lease).
const (
	batchSize = 1024
	stepTime  = time.Second
)

// step sends the due deliveries at the head of a destination's queue, one
// at a time, stopping at the first that fails, and records them all in one
// transaction. It returns how long to wait before the next step. A
// delivery sent but not recorded (a crash, a lost lease) is sent again:
// with the same webhook-id.
//
// held reports a head waiting for its next try (wait is until then).
func (w *Worker) step(ctx context.Context, name string) (wait time.Duration, sent int, held bool, err error) {
	var batch []store.Delivery
	var latest int64
	events := map[int64]*store.Event{}
	err = w.st.Read(ctx, func(r store.Reader) error {
		var err error
		if batch, err = r.PendingDeliveries(ctx, name, batchSize); err != nil {
			return err
		}
		if len(batch) == 0 {
			latest, err = r.LatestSeq(ctx)
			return err
		}
		missing := w.recent.fill(batch, events)
		read := map[int64]*store.Event{}
		if err := readEvents(ctx, r, missing, read); err != nil {
			return err
		}
		w.recent.add(read)
		maps.Copy(events, read)
		return nil
	})
	if err != nil {
		return 0, 0, false, err
	}
	if len(batch) == 0 {
		return w.cfg.Poll, 0, false, w.skip(ctx, name, latest)
	}
	if wait := time.Until(batch[0].NextTS); wait > 0 {
		return wait, 0, true, nil
	}
	var tried []store.Delivery
	start := time.Now()
	for _, d := range batch {
		now := time.Now()
		if len(tried) > 0 && now.Sub(start) >= stepTime {
			break // record these; the rest in the next step
		}
		if d.NextTS.After(now) {
			break // redelivered or retried later: its turn comes
		}
		ev := events[d.EventSeq]
		// The destination, its secret and the client are read together,
		// so that a reload between them cannot mix old and new.
		dest, secret, client, ok := w.dest(name)
		if !ok {
			break // removed by a reload: its deliveries are made dead
		}
		var res Result
		if ev == nil {
			res = Result{Err: "the event is no longer stored"}
		} else {
			res = w.send(ctx, sender{dest, secret, client}, ev, MessageID(ev.Seq, name), now)
		}
		if ctx.Err() != nil {
			break // stopping: this try is made again later
		}
		w.metrics.result(name, res)
		d.Attempts++
		d.LastStatus, d.LastError = res.Status, res.Err
		d.UpdatedTS = time.Now().UTC()
		switch {
		case res.OK():
			d.State, d.LastError = store.DeliveryDelivered, ""
		case ev == nil, res.Permanent() && d.Attempts >= ClientErrorTries, now.Sub(d.CreatedTS) >= GiveUpAfter:
			d.State = store.DeliveryDead
		default:
			d.NextTS = now.Add(Backoff(d.Attempts, w.cfg.MinBackoff, w.cfg.MaxBackoff))
		}
		tried = append(tried, d)
		if !res.OK() {
			break
		}
	}
	if len(tried) == 0 {
		return 0, 0, false, nil
	}
	// Recorded even when stopping, if the store answers soon: fewer
	// repeats. With several replicas the context keeps the lease's fence,
	// so a replica that lost the lease records nothing.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if tried[len(tried)-1].State == store.DeliveryDelivered {
		// Only deliveries delivered: their record may be lost in a crash
		// (they are sent again, with the same webhook-id), so it does not
		// wait for the disk, and takes the store's one writer for less
		// time (docs/notifications.md, "Cost").
		rctx = store.WithLazyCommit(rctx)
	}
	err = w.st.Update(rctx, func(tx store.Tx) error {
		// The deliveries delivered, by answer status, one MarkDelivered
		// each (docs/notifications.md, "Cost"); a failed try, the last,
		// alone.
		delivered := map[int][]int64{}
		last := map[int]time.Time{}
		for _, d := range tried {
			if d.State == store.DeliveryDelivered {
				delivered[d.LastStatus] = append(delivered[d.LastStatus], d.ID)
				last[d.LastStatus] = d.UpdatedTS
			}
		}
		for status, ids := range delivered {
			if err := tx.MarkDelivered(rctx, name, ids, status, last[status]); err != nil {
				return err
			}
		}
		for i := range tried {
			d := &tried[i]
			if d.State == store.DeliveryDelivered {
				continue
			}
			if err := tx.UpdateDelivery(rctx, d); err != nil {
				return err
			}
			if d.State != store.DeliveryDead {
				continue
			}
			// Everything before it in the queue was delivered: the
			// cursor moves past it (its own row keeps it dead), so
			// that the next reads of the queue do not walk it again.
			if err := tx.SkipTo(rctx, name, d.EventSeq); err != nil {
				return err
			}
			if err := tx.AppendEvent(rctx, &store.Event{Type: store.EventNotifyDead, Actor: store.ActorCore,
				ClusterID: clusterOf(events[d.EventSeq]), Message: fmt.Sprintf("gave up delivering event %d to %s after %d tries: %s",
					d.EventSeq, name, d.Attempts, d.LastError),
				Data: map[string]any{"destination": name, "delivery": d.ID, "event_seq": d.EventSeq}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, err
	}
	last := tried[len(tried)-1]
	if last.State == store.DeliveryDead {
		w.log.Warn("delivery dead", "destination", name, "delivery", last.ID, "tries", last.Attempts, "err", last.LastError)
	} else if last.State == store.DeliveryPending {
		w.log.Info("delivery failed, will retry", "destination", name, "delivery", last.ID, "tries", last.Attempts,
			"status", last.LastStatus, "err", last.LastError, "next", last.NextTS)
	}
	return 0, len(tried), false, nil
}

// skipEvery is how far behind the newest event a destination with nothing
// pending lets its cursor lag before moving it there: its next delivery is
// looked for among the events after its cursor.
const skipEvery = 1024

// skip moves the cursor of a destination with nothing pending up to the
// event latest when it lags by skipEvery or more: a destination that takes
// few events then does not look for its next among every event since its
// last (docs/notifications.md, "Cost").
func (w *Worker) skip(ctx context.Context, name string, latest int64) error {
	w.mu.Lock()
	from := w.skipped[name]
	w.mu.Unlock()
	if latest-from < skipEvery {
		return nil
	}
	rctx := store.WithLazyCommit(ctx) // lost in a crash: done again
	if err := w.st.Update(rctx, func(tx store.Tx) error { return tx.SkipTo(rctx, name, latest) }); err != nil {
		return err
	}
	w.mu.Lock()
	w.skipped[name] = latest
	w.mu.Unlock()
	return nil
}

// readEvents reads the events of a batch into events, by seq (nil: no
// longer stored): in one read of their range when they lie close together
// (a destination that takes most events), else one by one.
func readEvents(ctx context.Context, r store.Reader, batch []store.Delivery, events map[int64]*store.Event) error {
	if len(batch) == 0 {
		return nil
	}
	first, last := batch[0].EventSeq, batch[0].EventSeq
	for _, d := range batch {
		first, last = min(first, d.EventSeq), max(last, d.EventSeq)
		events[d.EventSeq] = nil
	}
	if span := last - first + 1; len(batch) > 1 && span <= int64(4*len(batch)) {
		evs, err := r.Events(ctx, first-1, int(span))
		if err != nil {
			return err
		}
		for i := range evs {
			if _, ok := events[evs[i].Seq]; ok {
				events[evs[i].Seq] = &evs[i]
			}
		}
		return nil
	}
	for _, d := range batch {
		e, err := store.EventBySeq(ctx, r, d.EventSeq)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		events[d.EventSeq] = e
	}
	return nil
}

func clusterOf(e *store.Event) string {
	if e == nil {
		return ""
	}
	return e.ClusterID
}

// Backoff is the wait after the given number of failed tries: doubling
// from min, at most max, with jitter (a half to the whole of it).
func Backoff(tries int, minD, maxD time.Duration) time.Duration {
	d := minD
	for i := 1; i < tries && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return d/2 + rand.N(d/2+1)
}

// Result is the outcome of one try.
type Result struct {
	// Status is the HTTP status (0: no answer).
	Status int           `json:"status"`
	Err    string        `json:"error,omitempty"`
	Took   time.Duration `json:"took_ns"`
}

// OK reports a 2xx answer read whole.
func (r Result) OK() bool { return r.Err == "" && r.Status >= 200 && r.Status < 300 }

// Permanent reports an answer that retrying soon will not change: a 4xx
// other than 408 and 429.
func (r Result) Permanent() bool {
	return r.Status >= 400 && r.Status < 500 && r.Status != 408 && r.Status != 429
}

// sender is a destination as one try sends to it: its settings, its
// secret (nil: unsigned) and the client, read together.
type sender struct {
	Destination
	secret []byte
	client *http.Client
}

// send makes one try of delivering e to d as message id, at now.
func (w *Worker) send(ctx context.Context, d sender, e *store.Event, id string, now time.Time) Result {
	start := time.Now()
	res := w.post(ctx, d, e, id, now)
	res.Took = time.Since(start)
	return res
}

func (w *Worker) post(ctx context.Context, d sender, e *store.Event, id string, now time.Time) Result {
	body, err := w.recent.body(d.Format, w.cfg.PublicURL, e)
	if err != nil {
		return Result{Err: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Err: "bad url " + Redact(d.URL)}
	}
	req.Header.Set("Content-Type", ContentType(d.Format))
	req.Header.Set("User-Agent", "muster-notify")
	if d.secret != nil {
		if err := Sign(req.Header, d.secret, id, now, body); err != nil {
			return Result{Err: err.Error()}
		}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its text holds the whole URL: keep the cause alone
			err = ue.Err
		}
		return Result{Err: err.Error()}
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswer+1))
	res := Result{Status: resp.StatusCode}
	switch {
	case err != nil:
		res.Err = "reading the answer: " + err.Error()
	case n > MaxAnswer:
		res.Err = "answer over 64 KiB"
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		res.Err = resp.Status
	}
	return res
}

// Test sends a signed test event to a destination now, outside the
// outbox, and returns its result (ok false: no such destination).
func (w *Worker) Test(ctx context.Context, name, actor string) (Result, bool) {
	d, secret, client, ok := w.dest(name)
	if !ok {
		return Result{}, false
	}
	now := time.Now().UTC()
	e := &store.Event{Seq: 0, TS: now, Type: "notify.test", Actor: actor, Message: "test delivery to " + name}
	return w.send(ctx, sender{d, secret, client}, e, fmt.Sprintf("msg_test_%d_%s", now.UnixNano(), name), now), true
}

// Destinations returns the destinations in use, in configuration order.
func (w *Worker) Destinations() []Destination {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.dests)
}
