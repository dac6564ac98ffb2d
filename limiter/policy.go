package limiter

import (
	"errors"
	"fmt"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Caller policies: named bucket sizes for the identities a matcher assigns
// them, with optional shadow sizes that are charged beside the enforced
// ones and never enforced.

// DefaultPolicy is the name of the policy of every identity that matches no
// named one: Config's own PredecisionRefusal and Admission sizes.
const DefaultPolicy = "default"

// MaxPolicies bounds Config.Policies: a policy's index is kept in every map
// entry in 16 bits, and its name labels metrics.
const MaxPolicies = 1<<16 - 2

// Sizes sizes the two kinds of bucket of one policy.
type Sizes struct {
	PredecisionRefusal BucketConfig
	Admission          BucketConfig
}

// Policy is a named caller policy.
type Policy struct {
	// Name labels the policy's events and metrics. It must be non-empty,
	// unique and not DefaultPolicy.
	Name string
	// Sizes are the enforced sizes of the buckets of the policy's
	// identities.
	Sizes Sizes
	// Shadow, if not nil, are candidate sizes: every charge of the policy's
	// identities is also made on a bucket of these sizes, kept apart, whose
	// decision is never enforced; a charge it would have limited is
	// published as an Event with Shadow set.
	Shadow *Sizes
}

// policyTable is the policies in force: index 0 is the default policy,
// index i+1 is Config.Policies[i]. It is immutable once built; a
// reconfiguration builds a new one.
type policyTable struct {
	// rows are the policies, by index; the default is row 0.
	rows []policyRow
	// anyShadow: some policy has shadow sizes, so the shadow run is kept.
	anyShadow bool
	match     func(identity string) (int, bool)
	// byName maps a name to its index, for carrying state across a
	// reconfiguration by name.
	byName map[string]uint16
}

// policyRow is one policy: all a charge reads of it, in one place.
type policyRow struct {
	name string
	// enforced are the sizes the limiter enforces, by bucket.
	enforced [vocab.NumBuckets]params
	// mirrored are the sizes of the shadow run: the policy's shadow sizes
	// where it has them, its enforced sizes where it does not.
	mirrored [vocab.NumBuckets]params
	// shadowed reports that the policy has shadow sizes.
	shadowed bool
}

// resolve is the index of identity's policy in t.
func (t *policyTable) resolve(identity string) uint16 {
	if t.match == nil {
		return 0
	}
	i, ok := t.match(identity)
	if !ok || i < 0 || i >= len(t.rows)-1 {
		return 0 // no match, or a matcher answering outside the table: the default
	}
	return uint16(i + 1)
}

// newTable checks cfg's sizes and policies and builds their table.
func newTable(cfg Config) (*policyTable, error) {
	def, err := checkSizes(DefaultPolicy, Sizes{PredecisionRefusal: cfg.PredecisionRefusal, Admission: cfg.Admission})
	if err != nil {
		return nil, err
	}
	if len(cfg.Policies) > MaxPolicies {
		return nil, fmt.Errorf("%w: %d policies, at most %d", ErrInvalidConfig, len(cfg.Policies), MaxPolicies)
	}
	if len(cfg.Policies) > 0 && cfg.Match == nil {
		return nil, fmt.Errorf("%w: %d policies and no Match to assign them", ErrInvalidConfig, len(cfg.Policies))
	}
	n := len(cfg.Policies) + 1
	t := &policyTable{
		rows:   make([]policyRow, 1, n),
		match:  cfg.Match,
		byName: make(map[string]uint16, n),
	}
	t.rows[0], t.byName[DefaultPolicy] = policyRow{name: DefaultPolicy, enforced: def, mirrored: def}, 0
	var errs []error
	for _, p := range cfg.Policies {
		switch _, dup := t.byName[p.Name]; {
		case p.Name == "":
			errs = append(errs, fmt.Errorf("%w: a policy has an empty name", ErrInvalidConfig))
			continue
		case p.Name == DefaultPolicy:
			errs = append(errs, fmt.Errorf("%w: policy name %q is reserved for the default sizes", ErrInvalidConfig, p.Name))
			continue
		case dup:
			errs = append(errs, fmt.Errorf("%w: policy %q is named twice", ErrInvalidConfig, p.Name))
			continue
		}
		enf, err := checkSizes(p.Name, p.Sizes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mir := enf
		if p.Shadow != nil {
			if mir, err = checkSizes(p.Name+" shadow", *p.Shadow); err != nil {
				errs = append(errs, err)
				continue
			}
			t.anyShadow = true
		}
		t.byName[p.Name] = uint16(len(t.rows))
		t.rows = append(t.rows, policyRow{name: p.Name, enforced: enf, mirrored: mir, shadowed: p.Shadow != nil})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// mirror is the table of the shadow run: t with every policy's mirrored
// sizes enforced.
func (t *policyTable) mirror() *policyTable {
	m := *t
	m.rows = make([]policyRow, len(t.rows))
	for i, r := range t.rows {
		r.enforced = r.mirrored
		m.rows[i] = r
	}
	return &m
}

// checkSizes checks one policy's two bucket sizes.
func checkSizes(policy string, s Sizes) ([vocab.NumBuckets]params, error) {
	var errs []error
	for b, bc := range [vocab.NumBuckets]BucketConfig{vocab.PredecisionRefusal: s.PredecisionRefusal, vocab.Admission: s.Admission} {
		name := vocab.Bucket(b).String()
		if policy != DefaultPolicy {
			name = "policy " + policy + ": " + name
		}
		if bc.Burst == 0 {
			errs = append(errs, fmt.Errorf("%w: %s burst must be greater than 0", ErrInvalidConfig, name))
		}
		if bc.RefillInterval <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s refill interval must be greater than 0", ErrInvalidConfig, name))
		}
	}
	if len(errs) > 0 {
		return [vocab.NumBuckets]params{}, errors.Join(errs...)
	}
	return [vocab.NumBuckets]params{
		vocab.PredecisionRefusal: {burst: s.PredecisionRefusal.Burst, interval: int64(s.PredecisionRefusal.RefillInterval)},
		vocab.Admission:          {burst: s.Admission.Burst, interval: int64(s.Admission.RefillInterval)},
	}, nil
}
