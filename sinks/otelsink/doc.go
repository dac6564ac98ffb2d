// Package otelsink provides the limited-invocation sink that makes limited
// invocations visible to OpenTelemetry: two counters and a span event.
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
// an operator:
//
//	OTel instrument (unit {invocation})     Prometheus series
//	registrar.limited.predecision_refusal   registrar_limited_predecision_refusal_total{verb}
//	registrar.limited.admission             registrar_limited_admission_total{verb}
//
// A rising predecision_refusal rate says a caller is flooding malformed
// requests; those callers still got their real, permanent refusals. A rising
// admission rate says well-formed requests are being throttled (answered
// RegistrarBusy with a retry-after): a bring-up wave may be stalling. The
// only attribute is verb ("mint" or "deregister"); the caller identity is
// never an attribute.
//
// Both counters are incremented with the invocation's context, so when the
// invocation's span is sampled the SDK's trace-based exemplar filter
// attaches its trace id to the measurement: in an OpenMetrics scrape an
// admission-throttle spike links to a trace. The increments of invocations
// whose span is not sampled (most of a flood's) carry no exemplar, so they
// are summed in atomics and added to the counters when a reader collects
// (internal/deferredcount): every collection still counts every earlier
// invocation, and a flood's call costs an atomic add instead of the SDK's
// synchronous Add.
//
// New adds zero to every (counter, verb) series, so all four series are
// exported from the first collection and a rate or increase over the first
// limited invocation is not lost to a series appearing mid-window.
//
// # Span event
//
// When the context carries a recording span (the verb's registrar.mint or
// registrar.deregister span), Limited adds the event "registrar.limited"
// with the attributes registrar.limited_bucket ("predecision_refusal" or
// "admission") and registrar.verb, and, for admission only,
// registrar.retry_after_s (the retry-after answered to the caller, in whole
// seconds). A non-recording span costs one IsRecording check.
//
// # Cost
//
// Every attribute set and measurement option is built once in New; Limited
// with a non-recording span does not allocate.
package otelsink
