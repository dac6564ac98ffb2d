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
// (verb, bucket) in its pool: four buckets per pool, eight in all, created
// full with the limiter, sized like the map's entries, never reclaimed and
// not counted against a cap. So the miss path is total, and a flood of
// remote identities never takes a slot or an overflow bucket of a local
// caller.
//
// The residual: while a pool is saturated with drained entries, that
// pool's identities without an entry share its overflow buckets, so one
// caller's flood can throttle another's in the same pool. Reaching that
// state needs an identity that is unstable across connections, which is a
// transport defect, not a sizing question.
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
// entries and the overflow buckets use the new sizes. The shards are
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
