package shared

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// The fleet's single flight: see "Single flight across the fleet" in the
// package documentation.

// heldLease is a lease this process holds, renewed until stop closes.
type heldLease struct {
	token string
	stop  chan struct{}
	since time.Time
}

// maxRenewal bounds how long a lease is renewed: a load that has not
// ended by then is stuck, and the fleet stops waiting for it.
const maxRenewal = 10 * time.Minute

// maxHeld bounds the leases remembered: past it, those held longer than
// maxRenewal are dropped.
const maxHeld = 4096

// pollStart and pollMax are how often a waiter on an engine without
// announcements (memcached) looks for the value, from the first look to
// the slowest.
const (
	pollStart = 5 * time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// awaitLease takes ek's lease (the caller then loads from the origin, and
// Put or Release lets the lease go), or, while another node holds it,
// waits for its value: false when the caller is to go to the origin, and
// then the token of the lease the caller holds ("" when it holds none).
func (t *Tier) awaitLease(ctx context.Context, ek string, bound int64) (raw []byte, token string, ok bool) {
	// Subscribe before asking, so that an announcement between the
	// lease's refusal and the wait is not lost.
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.waiters[ek] = append(t.waiters[ek], ch)
	t.mu.Unlock()
	defer t.unwait(ek, ch)

	waited := false
	for {
		token, won, ok := t.tryLease(ctx, ek)
		if !ok {
			return nil, "", false
		}
		if won {
			// The holder before may have set the value and let the lease
			// go between our miss and our lease: look once more.
			if raw, found := t.fetch(ctx, ek, bound); found {
				t.releaseLease(ek, token, true)
				return raw, "", true
			}
			return nil, token, false
		}
		if !waited {
			t.stats.leasesWaited.Add(1)
			waited = true
		}
		raw, found, lapsed := t.waitValue(ctx, ek, bound, ch)
		if found {
			return raw, "", true
		}
		if !lapsed {
			t.stats.leasesTimedOut.Add(1)
			return nil, "", false
		}
		t.stats.leasesLapsed.Add(1)
	}
}

// tryLease asks for ek's lease under a new token: the token, won, and
// whether the engine answered.
func (t *Tier) tryLease(ctx context.Context, ek string) (token string, won, ok bool) {
	var b [16]byte
	rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	won, err := t.eng.lease(cctx, ek, token, t.opts.LeaseTTL)
	cancel()
	if err != nil {
		t.fault(ctx, "lease", err)
		return "", false, false
	}
	if won {
		t.stats.leasesWon.Add(1)
		t.hold(ek, token)
	}
	return token, won, true
}

// waitValue waits for ek's value while its lease is held: the value
// (found), or that the lease lapsed without one (its holder died), or
// neither (the holder gave up, the engine failed, ctx ended): then the
// caller goes to the origin.
func (t *Tier) waitValue(ctx context.Context, ek string, bound int64, ch chan struct{}) (raw []byte, found, lapsed bool) {
	// With announcements a look now and then only catches one lost (a
	// subscription reconnecting) or a holder that died; without, looks
	// are how the value is found.
	poll := t.opts.LeaseTTL / 2
	if !t.eng.announces() {
		poll = pollStart
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		select {
		case <-ch:
			// Announced: the value is set, or its holder gave up.
			raw, found := t.fetch(ctx, ek, bound)
			return raw, found, false
		case <-timer.C:
		case <-ctx.Done():
			return nil, false, false
		}
		if raw, found := t.fetch(ctx, ek, bound); found {
			return raw, true, false
		}
		if !t.up() {
			return nil, false, false
		}
		cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
		state, err := t.eng.leased(cctx, ek)
		cancel()
		switch {
		case err != nil:
			t.fault(ctx, "lease", err)
			return nil, false, false
		case state == leaseNone:
			return nil, false, true
		case state == leaseAbandoned:
			return nil, false, false
		}
		if !t.eng.announces() {
			poll = min(poll*3/2, pollMax)
		}
		timer.Reset(poll)
	}
}

// leaseState is what an engine holds of a key's lease.
type leaseState int

const (
	leaseNone      leaseState = iota // no lease: nobody loads the key
	leaseHeld                        // a node loads the key
	leaseAbandoned                   // the last holder gave up (its load failed)
)

// hold records that this process holds ek's lease under token, and renews
// it every LeaseTTL/3 until Put or Release lets it go.
func (t *Tier) hold(ek, token string) {
	l := &heldLease{token: token, stop: make(chan struct{}), since: time.Now()}
	t.mu.Lock()
	if len(t.held) >= maxHeld {
		for k, h := range t.held {
			if l.since.Sub(h.since) > maxRenewal {
				close(h.stop)
				delete(t.held, k)
			}
		}
	}
	if old := t.held[ek]; old != nil {
		close(old.stop)
	}
	t.held[ek] = l
	t.mu.Unlock()
	go t.renewLoop(ek, l)
}

// renewLoop renews l, the lease of ek, until it stops, is lost, or has
// been renewed for maxRenewal.
func (t *Tier) renewLoop(ek string, l *heldLease) {
	tick := time.NewTicker(t.opts.LeaseTTL / 3)
	defer tick.Stop()
	end := time.NewTimer(maxRenewal)
	defer end.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		if !t.up() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.Timeout)
		ok, err := t.eng.renew(ctx, ek, l.token, t.opts.LeaseTTL)
		cancel()
		switch {
		case err != nil:
			t.fault(context.Background(), "renew", err)
		case !ok:
			return // lapsed, and another node may hold it now
		default:
			t.stats.leasesRenewed.Add(1)
		}
	}
}

func (t *Tier) unwait(ek string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.waiters[ek]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(t.waiters, ek)
	} else {
		t.waiters[ek] = ws
	}
}

// announced wakes the waiters of ek, whose value another node has set (or
// given up on).
func (t *Tier) announced(ek string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ch := range t.waiters[ek] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Release drops the lease of key, if this process holds it, when no Put
// follows the miss that took it (the origin failed, or the chunk is not
// to be kept): the nodes that wait for the value go to the origin at once
// instead of waiting for the lease to lapse. It lets go whichever caller's
// lease of key this process holds: the chunk path has one load of a key
// at a time in a process (cache.Store's loads are single-flight); callers
// that may not hold the lease use ReleaseAnswer with their token.
func (t *Tier) Release(key string) { t.releaseLease(engineKey(key), anyHolder, false) }

// anyHolder is the token of releaseLease that lets go the lease this
// process holds, whichever caller took it.
const anyHolder = "*"

// releaseLease stops renewing ek's lease and drops it, if this process
// holds it under token (or token is anyHolder): stored says whether the
// value was set (else the holder gave up, and the waiters go to the
// origin). A token of "" holds nothing.
func (t *Tier) releaseLease(ek, token string, stored bool) {
	if token == "" {
		return
	}
	t.mu.Lock()
	l := t.held[ek]
	if l == nil || (token != anyHolder && l.token != token) {
		t.mu.Unlock()
		return
	}
	delete(t.held, ek)
	t.mu.Unlock()
	close(l.stop)
	if !t.up() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Timeout)
	defer cancel()
	if err := t.eng.release(ctx, ek, l.token, !stored); err != nil {
		t.fault(context.Background(), "release", err)
	}
}
