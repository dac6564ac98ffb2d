// Package otelsink provides the limited-invocation sink that makes limited
// invocations and shadow charges visible to OpenTelemetry: three counters
// and a span event.
//
// It sits in the middle of the production sink chain
// (coalesce → otelsink → counting) and forwards every event, unchanged, to
// the sink it wraps, so the counting sink stays the single per-bucket count
// in the tree that the health snapshot reads.
//
// # Counters
//
// The two buckets are two separate counters, never one counter with a
// bucket label and never their sum, because they mean different things to
// an operator; shadow charges are a third counter, never either of them:
//
//	OTel instrument (unit {invocation})     Prometheus series
//	registrar.limited.predecision_refusal   registrar_limited_predecision_refusal_total{policy,verb}
//	registrar.limited.admission             registrar_limited_admission_total{policy,verb}
//	registrar.shadow_limited                registrar_shadow_limited_total{policy,verb,bucket}
//
// A rising predecision_refusal rate says a caller is flooding malformed
// requests; those callers still got their real, permanent refusals. A rising
// admission rate says well-formed requests are being throttled (answered
// RegistrarBusy with a retry-after): a bring-up wave may be stalling.
//
// The attributes are policy (the caller policy whose sizes the charged
// bucket had, limiter.Event.Policy: "default" for the [registrar] sizes and
// for an event that names none), verb ("mint" or "deregister") and, on the
// shadow counter only, bucket. The policy names are bounded by the
// configuration; MaxPolicies bounds them again, whatever reaches the sink
// (past it, OtherPolicy). The caller identity is never an attribute.
//
// A shadow event (limiter.Event.Shadow) says the call would have been
// limited by its policy's shadow sizes, the candidate sizes an operator is
// trying before enforcing them; the call was answered as if the shadow did
// not exist. It is counted in registrar.shadow_limited only, never in the
// limited counters, and the counting sink the chain forwards it to ignores
// it too. A rising shadow rate is what the candidate sizes would have
// refused: the evidence for or against promoting them.
//
// Every counter is incremented with the invocation's context, so when the
// invocation's span is sampled the SDK's trace-based exemplar filter
// attaches its trace id to the measurement: in an OpenMetrics scrape an
// admission-throttle spike links to a trace. The increments of invocations
// whose span is not sampled (most of a flood's) carry no exemplar, so they
// are summed in atomics and added to the counters when a reader collects
// (internal/deferredcount): every collection still counts every earlier
// invocation, and a flood's call costs an atomic add instead of the SDK's
// synchronous Add.
//
// New adds zero to every (policy, verb) series of the limited counters for
// the default policy, and DeclarePolicy does it for a configured policy
// (and to its shadow series when it has a shadow), so those series are
// exported from the first collection and a rate or increase over the first
// limited invocation is not lost to a series appearing mid-window. A
// policy the daemon did not declare gets its series at its first event.
//
// # Span events, and no log line
//
// When the context carries a recording span (the verb's registrar.mint or
// registrar.deregister span), Limited adds the event "registrar.limited"
// with the attributes registrar.limited_bucket ("predecision_refusal" or
// "admission"), registrar.verb, registrar.policy and, for admission only,
// registrar.retry_after_s (the retry-after answered to the caller, in whole
// seconds). A shadow event adds "registrar.shadow_limited" instead, with
// the bucket, verb and policy: the span of an answered call then says which
// of its policy's candidate buckets would have refused it. A non-recording
// span costs one IsRecording check.
//
// Neither kind of event writes a log line: a flood would make one per call,
// and the counted records of package coalesce are the durable, bounded
// account of both (a shadow window's record says "shadow": true).
//
// # Cost
//
// Every attribute set and measurement option of a policy is built once,
// when the policy is first declared or seen; Limited with a non-recording
// span does not allocate. The default policy's series are found without a
// map lookup, another policy's with one lookup in a map read without a
// lock.
package otelsink
