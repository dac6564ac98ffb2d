package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// The administrative view of the limiter: registrar-otel limits show and
// limits reset (server.Options.Limits and LimitsReset).

// limitsShow answers GET /v1/admin/limits from the limiter.
func (d *Daemon) limitsShow(_ context.Context, req wire.LimitsRequest) (wire.LimitsAnswer, error) {
	ids := []string{req.Identity}
	if req.Identity == "" {
		ids = d.limiter.Identities()
	}
	ans := wire.LimitsAnswer{Identities: make([]wire.IdentityLimits, 0, len(ids))}
	for _, id := range ids {
		ans.Identities = append(ans.Identities, identityLimits(d.limiter.Inspect(id)))
	}
	ans.Overflow = overflowLimits(d.limiter.Overflow(), d.limiter.Stats())
	return ans, nil
}

// identityLimits is st on the wire.
func identityLimits(st limiter.IdentityStatus) wire.IdentityLimits {
	il := wire.IdentityLimits{Identity: st.Identity, Policy: st.Policy, Pool: poolOf(st.Local), Buckets: make([]wire.KeyLimits, 0, vocab.NumVerbs*vocab.NumBuckets)}
	for v := range st.Buckets {
		for b := range st.Buckets[v] {
			bs := st.Buckets[v][b]
			kl := wire.KeyLimits{Verb: vocab.Verb(v), Bucket: vocab.Bucket(b), BucketLimits: bucketLimits(bs)}
			if bs.Shadow != nil {
				sh := bucketLimits(*bs.Shadow)
				kl.Shadow = &sh
			}
			il.Buckets = append(il.Buckets, kl)
		}
	}
	return il
}

func bucketLimits(bs limiter.BucketStatus) wire.BucketLimits {
	return wire.BucketLimits{
		State:             keyState(bs.State),
		Burst:             bs.Burst,
		RefillIntervalMS:  uint64(bs.RefillInterval / time.Millisecond),
		Tokens:            bs.Tokens,
		RetryAfterSeconds: wire.DelaySeconds(bs.RetryAfter),
	}
}

func keyState(s limiter.State) wire.KeyState {
	switch s {
	case limiter.StateEntry:
		return wire.KeyEntry
	case limiter.StateOverflow:
		return wire.KeyOverflow
	}
	return wire.KeyAbsent
}

func poolOf(local bool) wire.Pool {
	if local {
		return wire.PoolLocal
	}
	return wire.PoolRemote
}

// overflowLimits is the overflow buckets on the wire, local pool first.
func overflowLimits(os []limiter.OverflowStatus, st limiter.Stats) []wire.PoolOverflow {
	pools := []wire.PoolOverflow{
		{Pool: wire.PoolLocal, Entries: st.LocalEntries, MaxEntries: limiter.MaxLocalEntries, Buckets: []wire.OverflowBucket{}},
		{Pool: wire.PoolRemote, Entries: st.Entries - st.LocalEntries, MaxEntries: limiter.MaxEntries, Buckets: []wire.OverflowBucket{}},
	}
	for _, o := range os {
		p := &pools[1]
		if o.Local {
			p = &pools[0]
		}
		p.Buckets = append(p.Buckets, wire.OverflowBucket{
			Policy:            o.Policy,
			Verb:              o.Verb,
			Bucket:            o.Bucket,
			Burst:             o.Burst,
			RefillIntervalMS:  uint64(o.RefillInterval / time.Millisecond),
			Tokens:            o.Tokens,
			RetryAfterSeconds: wire.DelaySeconds(o.RetryAfter),
		})
	}
	return pools
}

// limitsReset refills the identity's selected buckets, enforced and
// shadow, and records the reset in the audit store as caller's.
func (d *Daemon) limitsReset(ctx context.Context, caller string, req wire.LimitsResetRequest) (wire.LimitsResetAnswer, error) {
	var verbs []vocab.Verb
	var buckets []vocab.Bucket
	if req.Verb != nil {
		verbs = []vocab.Verb{*req.Verb}
	}
	if req.Bucket != nil {
		buckets = []vocab.Bucket{*req.Bucket}
	}
	// The record first, as the verbs write their intent before any work:
	// a reset that could not be recorded is not made.
	if err := d.recordLimitsReset(ctx, caller, req.Identity, verbs, buckets); err != nil {
		return wire.LimitsResetAnswer{}, fmt.Errorf("the reset was not made: its audit record could not be written: %w", err)
	}
	before := d.limiter.Inspect(req.Identity)
	after := d.limiter.Reset(req.Identity, verbs, buckets)
	ans := wire.LimitsResetAnswer{Identity: req.Identity, Policy: before.Policy, Pool: poolOf(before.Local), Reset: make([]wire.KeyReset, 0, len(after))}
	for _, a := range after {
		b := before.Buckets[a.Verb][a.Bucket]
		kr := wire.KeyReset{Verb: a.Verb, Bucket: a.Bucket, Before: keyState(b.State), TokensBefore: b.Tokens, Tokens: a.Tokens}
		if a.Shadow != nil {
			n := a.Shadow.Tokens
			kr.ShadowTokens = &n
		}
		ans.Reset = append(ans.Reset, kr)
	}
	ans.Recorded = true
	return ans, nil
}

// recordLimitsReset appends the admin record of a limits reset: caller
// reset identity's buckets of verbs and buckets (nil: all of them).
func (d *Daemon) recordLimitsReset(ctx context.Context, caller, identity string, verbs []vocab.Verb, buckets []vocab.Bucket) error {
	if len(verbs) == 0 {
		verbs = []vocab.Verb{vocab.Mint, vocab.Deregister}
	}
	if len(buckets) == 0 {
		buckets = []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission}
	}
	return d.store.Append(ctx, &audit.Record{
		Phase:          audit.PhaseAdmin,
		CallerIdentity: caller,
		Admin:          &audit.Admin{Action: audit.ActionLimitsReset, Identity: identity, Verbs: verbs, Buckets: buckets},
	})
}
