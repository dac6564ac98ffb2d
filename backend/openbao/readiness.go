package openbao

import (
	"context"
	"fmt"
	"time"
)

// NotReadyError is Ready's answer while the backend cannot reach an
// active node of the cluster: its text is the readiness probe's body.
type NotReadyError struct {
	// For is how long the requests have failed to reach an active node.
	For time.Duration
	// Grace is the readiness grace it exceeded (openbao.readiness_grace_ms).
	Grace time.Duration
	// LastFailure names the node and why its last attempt failed.
	LastFailure string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("openbao cluster unreachable for %s (readiness grace %s): last failure: %s",
		e.For.Truncate(100*time.Millisecond), e.Grace, e.LastFailure)
}

// Reachability reports what the backend knows about reaching the
// cluster: the last contact and, while its requests fail, since when and
// why.
func (b *Backend) Reachability() Reachability { return b.nodes.reachability() }

// Ready is the readiness probe's view of the backend at now: nil while the
// last request reached an active node, or the requests have failed for
// less than the readiness grace; else a *NotReadyError saying since when
// and why. A balancer in front of several registrars then routes around
// one that cannot reach the cluster. It makes no request: Probe, on the
// daemon's tick, keeps the view fresh when no caller is minting.
func (b *Backend) Ready(now time.Time) error {
	r := b.nodes.reachability()
	if r.FailingSince.IsZero() {
		return nil
	}
	if d := now.Sub(r.FailingSince); d >= b.grace {
		return &NotReadyError{For: d, Grace: b.grace, LastFailure: r.LastFailure}
	}
	return nil
}

// probeEvery is how stale the backend's view of the cluster may grow
// before Probe asks: a fraction of the readiness grace, so an idle daemon
// notices a cluster it cannot reach within about 1.25 times the grace.
func (b *Backend) probeEvery() time.Duration { return max(b.grace/4, 250*time.Millisecond) }

// Probe looks the backend's token up (auth/token/lookup-self, which a
// standby forwards to the active node) when no request ended within the
// last quarter of the readiness grace, so Ready stays true to the cluster
// while no caller mints. It returns at once when the view is fresh or a
// probe is already running; otherwise it runs the lookup in the
// background, bounded by openbao.request_timeout_ms, and returns. The
// daemon calls it on every tick.
func (b *Backend) Probe(now time.Time) {
	if last := b.nodes.reachability().LastContact; !last.IsZero() && now.Sub(last) < b.probeEvery() {
		return
	}
	if !b.probing.CompareAndSwap(false, true) {
		return
	}
	if err := b.enter(); err != nil {
		b.probing.Store(false)
		return
	}
	go func() {
		defer b.probing.Store(false)
		defer b.leave()
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		defer cancel()
		if info, err := b.lookupSelf(ctx, ""); err == nil {
			b.noteLookup(info)
		}
	}()
}
