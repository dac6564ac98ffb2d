// Package limiter bounds how fast one client identity may drive the
// registrar's two verbs, with two token buckets per (identity, verb).
//
// # Key and buckets
//
// A bucket is keyed by (client identity, verb, bucket). The identity is an
// opaque string used verbatim: never parsed, normalised or stripped. Bucket
// has exactly two values, named for where the invocation was when the
// limiter was charged, never for what it turned out to be:
//
//   - PredecisionRefusal, charged when the pure pre-derivation checks failed
//     (malformed input, unknown component). A limited invocation writes no
//     audit records but still gets its real, permanent refusal.
//   - Admission, charged when the checks passed, before the intent write and
//     before any backend work. A limited invocation is throttled: the caller
//     gets a retryable RegistrarBusy with Decision.RetryAfterSeconds.
//
// Two verbs × two buckets gives at most four buckets per identity.
//
// # Token buckets
//
// A bucket is created lazily holding its full burst, lives in memory only
// and is never persisted. Tokens accrue one per refill interval, capped at
// the burst, in integer arithmetic on a monotonic clock (Instant). A partial
// interval is banked, not discarded, so any interval is honoured exactly over
// any horizon; a full bucket banks nothing, so a bucket drained at a boundary
// never gets a second burst. An instant earlier than a bucket's last accrual
// (a clock read outside the lock under contention) is clamped: it adds no
// token and never moves the accrual backwards.
//
// A limited charge's retry-after is the time until the bucket holds one
// token, rounded up to whole seconds, at least 1. It is deterministic; a
// caller with several outstanding requests should jitter its own retries.
//
// # The bounded map
//
// The map has two pools of entries, each capped apart: the remote pool
// (MaxEntries, 256: the reference deployment's 64 identities × 4 buckets)
// holds the identities Config.Local does not report (the certificate
// identities), and the local pool (MaxLocalEntries, 256) those it does
// (the unix socket's callers). A charge on an absent key below its pool's
// cap inserts a full entry. At the cap, every entry refilled to its full
// burst is reclaimed first (a full entry is indistinguishable from an
// absent one); an entry below full is never removed, anywhere, for any
// reason, since that would hand a caller a fresh budget for waiting. If
// nothing was full, the charge falls on the overflow bucket of its
// (policy, verb, bucket) in its pool: four buckets per policy and pool,
// created full with the limiter (or with the policy), sized like the
// policy's entries, never reclaimed and not counted against a cap. So the miss path is total, and a flood of
// remote identities never takes a slot or an overflow bucket of a local
// caller.
//
// The residual: while a pool is saturated with drained entries, that
// pool's identities without an entry share its overflow buckets, so one
// caller's flood can throttle another's in the same pool. Reaching that
// state needs an identity that is unstable across connections, which is a
// transport defect, not a sizing question.
//
// # Caller policies
//
// Config.Policies size the buckets of the identities Config.Match assigns
// them; every other identity has the default policy, Config's own sizes.
// A policy sizes buckets and never merges identities: the key stays
// (identity, verb, bucket). The policy is resolved when an entry is made
// and again for every entry at a reconfiguration, never on a present key's
// charge, and a connection's identity is hashed once (Caller), so a
// present key's charge costs the same with 1,024 policies as with none.
//
// A policy may carry Shadow sizes, candidates to try before enforcing
// them. While one does, the limiter keeps a shadow run: a second map,
// started as a copy of the enforced state re-expressed in the shadow sizes
// (a policy without shadow sizes keeps its enforced ones there), charged
// after every charge with the same key at the same instant. Its decisions
// are exactly those of a limiter that had enforced the shadow sizes from
// that moment, pool caps, reclaims and overflow included; they are never
// enforced, and a charge it finds no token for, of an identity of a
// shadowed policy, is published as an Event with Shadow set. Answers and
// the enforced buckets are byte for byte what they would be without it;
// the cost is a second charge per call while a shadow is configured.
//
// Status, Inspect, Identities and Overflow read the state without charging
// (the RateLimit answer headers and limits show); Reset refills one
// identity's own buckets to their burst (limits reset).
//
// # Reconfiguration
//
// ReconfigureAt puts new bucket sizes in force without a restart (the
// daemon's configuration reload). Every existing bucket keeps its state and
// is re-expressed in the new sizes without minting a token: its holding
// becomes the lesser of what it holds under the old sizes and what it
// would hold had the new sizes applied since its last accrual, capped at
// the new burst, with the banked fraction of a token kept as the same
// fraction of the new interval. A drained bucket stays drained; new
// entries and the overflow buckets use the new sizes. An entry whose
// identity the new configuration assigns another policy is re-expressed in
// that policy's sizes by the same rule, so adding, changing, removing or
// promoting a policy never mints a token either. The shards are
// moved one at a time, so a charge waits for at most one shard's pass.
//
// # Events and sinks
//
// Each limited charge publishes one Event to the limiter's Sink, after the
// lock is released. Sinks compose by wrapping; the production chain is
// coalesce → otelsink → counting.
//
// # What the two buckets isolate
//
// A flood on PredecisionRefusal (free for an attacker: no valid input, no
// backend cost) cannot starve legitimate mints. A caller able to send
// well-formed, derivable requests can still spend admission budget with
// requests that end in refusal; that is bounded by the attacker's cost (every
// attempt costs backend work), not isolated.
package limiter
