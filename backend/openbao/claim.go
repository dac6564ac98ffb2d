package openbao

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ClockSkew is how far apart the registrars' wall clocks may be for the
// claims to exclude each other (package doc, "Several registrars"): a
// claim's expiry is written by its holder's clock and judged by the
// others'.
const ClockSkew = 5 * time.Second

// MinClaimTTL is the shortest claim lifetime; ClaimTTL is longer with a
// long request timeout.
const MinClaimTTL = 30 * time.Second

// maxLostRaces bounds the compare-and-set writes one call may lose: each
// lost one means another registrar wrote the binding meanwhile (made
// progress), so a call that keeps losing answers a retryable error rather
// than looping.
const maxLostRaces = 8

// ErrClaimHeld matches the error of a call that waited for another
// registrar's claim on the registration and gave up before it was released
// or expired. Nothing was written; the caller retries (the wire's 503
// BackendUnavailable).
var ErrClaimHeld = errors.New("openbao: the registration is claimed by another registrar")

// claims is a backend's side of the claims: its instance nonce (the claim
// owner it writes), its clock and its test hooks. The zero value is ready:
// init fills it on first use.
type claims struct {
	once  sync.Once
	nonce string
	// now is the wall clock the expiries are written and judged by.
	now func() time.Time
	// sleep waits between two reads of a claim held by another registrar.
	sleep func(ctx context.Context, d time.Duration) error
	// step, when set (tests only), is called before each named step of a
	// claimed operation; an error stops the call there, as a registrar
	// that died at that step would stop (nothing more is sent).
	step func(id, step string) error
}

func (c *claims) init() {
	c.once.Do(func() {
		var b [12]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
		c.nonce = hex.EncodeToString(b[:])
		if c.now == nil {
			c.now = time.Now
		}
		if c.sleep == nil {
			c.sleep = sleepCtx
		}
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claimTTL is how long a claim lives after its holder sent it:
// MinClaimTTL, or 2 × ClockSkew + 4 request timeouts if longer.
func (b *Backend) claimTTL() time.Duration {
	return max(MinClaimTTL, 2*ClockSkew+4*b.timeout)
}

// claimBudget is how long a holder may go on sending requests after it sent
// its claim: the claim's life less one request timeout (a request sent
// at the budget's end is over one timeout later) and the clock skew (the
// others judge the expiry by their clocks).
func (b *Backend) claimBudget() time.Duration {
	return b.claimTTL() - b.timeout - ClockSkew
}

// held is one claim this call holds: the binding's version it wrote, and
// the instant (by the backend's clock) after which it sends nothing more.
type held struct {
	version  int
	deadline time.Time
}

// claimState says how a binding's claim stands for this backend.
type claimState uint8

const (
	claimFree    claimState = iota // none, expired, or this registrar's own
	claimByOther                   // another registrar's, not yet expired
)

// claimOf reads bd's claim: free when it has none, when it is this
// registrar's own (the id's lock serialises this registrar's calls, so its
// own claim is a dead call's), or when its expiry has passed by this
// registrar's clock; else held by another, until the returned instant.
func (b *Backend) claimOf(bd *binding) (claimState, time.Time) {
	if bd.claimOwner == "" || bd.claimOwner == b.claims.nonce {
		return claimFree, time.Time{}
	}
	exp, err := time.Parse(time.RFC3339Nano, bd.claimExpires)
	if err != nil || !b.claims.now().Before(exp) {
		return claimFree, time.Time{}
	}
	return claimByOther, exp
}

// claimWait is how long one call waits, in all, for other registrars'
// claims on its registration to be released: one request timeout, which a
// holder's whole mint normally takes a small part of.
func (b *Backend) claimWait() time.Duration { return b.timeout }

// waiter paces one call's re-reads of a binding another registrar holds.
type waiter struct {
	until time.Time // by the backend's clock
	pause time.Duration
}

// wait pauses before the next read of a binding claimed by another
// registrar until exp. It fails with ErrClaimHeld once the call's wait is
// spent, and with ctx's error when ctx ends first.
func (b *Backend) wait(ctx context.Context, w *waiter, id string, exp time.Time) error {
	now := b.claims.now()
	if w.until.IsZero() {
		w.until, w.pause = now.Add(b.claimWait()), 2*time.Millisecond
	}
	if !now.Before(w.until) {
		return b.tel.saturated(ctx, OpBindingClaim, fmt.Errorf("%w: %q, until %s; waited %s", ErrClaimHeld, id, exp.UTC().Format(time.RFC3339), b.claimWait()))
	}
	d := min(w.pause, exp.Sub(now), w.until.Sub(now))
	w.pause = min(2*w.pause, 50*time.Millisecond)
	if err := b.claims.sleep(ctx, max(d, time.Millisecond)); err != nil {
		return b.tel.saturated(ctx, OpBindingClaim, fmt.Errorf("waiting for another registrar's claim on %q: %w", id, err))
	}
	return nil
}

// claim writes bd (state as given) with this registrar's claim, with a
// compare-and-set on the version read (0: only if absent). lost reports a
// compare-and-set that did not match: someone else wrote the binding.
func (b *Backend) claim(ctx context.Context, id string, bd *binding, cas int) (h held, lost bool, err error) {
	start := b.claims.now()
	c := *bd
	c.claimOwner = b.claims.nonce
	c.claimExpires = start.Add(b.claimTTL()).UTC().Format(time.RFC3339Nano)
	version, lost, err := b.writeBinding(ctx, OpBindingClaim, id, &c, cas)
	if err != nil || lost {
		return held{}, lost, err
	}
	*bd = c
	bd.version = version
	return held{version: version, deadline: start.Add(b.claimBudget())}, false, nil
}

// errClaimLapsed is the error of a holder that would send a request after
// its claim budget: it stops, and another registrar may take over.
var errClaimLapsed = errors.New("openbao: the call outlived its claim on the registration")

// before is called before each state-changing step of a claimed call: it
// stops the call when its claim budget is spent (another registrar may
// hold the registration by now) or when a test stops it there.
func (b *Backend) before(h held, id, step string) error {
	if b.claims.step != nil {
		if err := b.claims.step(id, step); err != nil {
			return err
		}
	}
	if !b.claims.now().Before(h.deadline) {
		return fmt.Errorf("%w: %q before %s (a claim lives %s)", errClaimLapsed, id, step, b.claimTTL())
	}
	return nil
}
