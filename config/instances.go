package config

import (
	"fmt"
	"strconv"
	"unicode"
)

// Several registrars, one budget: registrar.instances = N says that N
// daemons serve the same callers (one OpenBao cluster, a balancer in
// front), and each enforces 1/N of every caller policy's budget. The
// burst is divided rounding down, so the N shares never add up to more
// than the policy's burst; the refill interval is multiplied by N, which
// divides the rate exactly (no rounding: the interval is an integer). A
// caller spreading its calls over the N daemons is then admitted at most
// burst + elapsed / interval in all, whatever the spread; a caller pinned
// to one daemon gets 1/N of its policy (docs/en/instances.md).

// MaxInstances is the largest accepted registrar.instances. A refill
// interval of the largest u32 milliseconds times MaxInstances still fits a
// time.Duration; a deployment of more registrars than this shares no
// caller's burst usefully.
const MaxInstances = 1024

// Share is one registrar's part of a policy's four sizes when n
// registrars share them: each burst divided by n rounding down, each
// refill interval (milliseconds per token) multiplied by n. The intervals
// are uint64: a u32 interval times n may exceed 32 bits.
type Share struct {
	Instances                          uint32
	AdmissionBurst                     uint32
	AdmissionRefillIntervalMS          uint64
	PredecisionRefusalBurst            uint32
	PredecisionRefusalRefillIntervalMS uint64
}

// Share returns one registrar's part of s when n registrars share it; n
// = 0 is taken as 1 (a Config built in code without the key).
func (s CallerSizes) Share(n uint32) Share {
	n = max(n, 1)
	return Share{
		Instances:                          n,
		AdmissionBurst:                     s.AdmissionBurst / n,
		AdmissionRefillIntervalMS:          uint64(s.AdmissionRefillIntervalMS) * uint64(n),
		PredecisionRefusalBurst:            s.PredecisionRefusalBurst / n,
		PredecisionRefusalRefillIntervalMS: uint64(s.PredecisionRefusalRefillIntervalMS) * uint64(n),
	}
}

// checkInstances is registrar.instances's rule: 1 to MaxInstances, and no
// burst it divides may round down to 0 tokens per registrar (the
// [registrar] table's and every caller policy's, enforced and shadow);
// each such burst is its own error, naming the burst's key.
func checkInstances(c *Config, key string, v uint32, add func(*KeyError)) {
	switch {
	case v == 0:
		add(&KeyError{Key: key, Value: v, hideValue: true,
			Rule: "must be greater than 0; it is the number of registrars sharing each caller policy's budget (1 for a single registrar)"})
		return
	case v > MaxInstances:
		add(&KeyError{Key: key, Value: v, Rule: fmt.Sprintf("must be at most %d", MaxInstances)})
		return
	case v == 1:
		return
	}
	r := &c.Registrar
	n := strconv.FormatUint(uint64(v), 10)
	// own: only the sizes the table sets; an inherited one is the error
	// of the key it takes its value from, reported there once.
	bursts := func(s CallerSizes, own bool, keyOf func(string) string) {
		for _, k := range sizeKeys {
			if k.bit != SetAdmissionBurst && k.bit != SetPredecisionRefusalBurst || own && !s.Set.Has(k.bit) {
				continue
			}
			// A zero burst is its own key's error already.
			if b := *k.field(&s); b != 0 && b < v {
				add(&KeyError{Key: keyOf(k.name), Value: b, hideValue: true, Rule: "must be at least registrar.instances (" + n +
					"): each registrar enforces burst / instances tokens rounded down, and " +
					strconv.FormatUint(uint64(b), 10) + " / " + n + " rounds to 0, which throttles the first legitimate mint"})
			}
		}
	}
	bursts(r.DefaultSizes(), false, func(k string) string { return keyPath("registrar", k) })
	for _, p := range r.Callers {
		bursts(p.Sizes, true, func(k string) string { return policyKeyPath(p.Name, k) })
		if p.Shadow != nil {
			bursts(*p.Shadow, true, func(k string) string { return policyKeyPath(p.Name, keyShadow, k) })
		}
	}
}

// checkServiceInstanceID is telemetry.service_instance_id's rule: "" (the
// derived default) or a value without control characters that is not
// only blanks.
func checkServiceInstanceID(_ *Config, key, v string, add func(*KeyError)) {
	if v == "" {
		return
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			add(&KeyError{Key: key, Value: v, Rule: "must not contain control characters"})
			return
		}
	}
	for _, r := range v {
		if !unicode.IsSpace(r) {
			return
		}
	}
	add(&KeyError{Key: key, Value: v, Rule: `must not be only blanks; leave it out (or "") to derive it from the host name and registrar.state_dir`})
}
