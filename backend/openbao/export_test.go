package openbao

import (
	"context"
	"time"
)

// SetClaimHooks gives b a clock (the claims' expiries are written and
// judged by it, and a holder's budget measured by it), a sleep for the
// waits on another registrar's claim, and a step hook called before each
// state-changing step of a claimed call (an error stops the call there, as
// a registrar that died would). nil keeps the default. Call it before the
// backend's first Mint or Deregister.
func SetClaimHooks(b *Backend, now func() time.Time, sleep func(context.Context, time.Duration) error, step func(id, step string) error) {
	b.claims.now, b.claims.sleep, b.claims.step = now, sleep, step
	b.claims.init()
}

// ClaimTTL returns how long b's claims live.
func ClaimTTL(b *Backend) time.Duration { return b.claimTTL() }

// ClaimBudget returns how long b may go on sending requests after its claim.
func ClaimBudget(b *Backend) time.Duration { return b.claimBudget() }
