package telemetry

import (
	"context"
	"errors"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Stock and authorization instruments: the live registrations per
// component against their ceiling, and the calls the caller policies
// refused.
const (
	// registrar_registrations
	Registrations = "registrar.registrations"
	// registrar_registrations_busiest_host
	RegistrationsBusiestHost = "registrar.registrations.busiest_host"
	// registrar_registrations_ceiling
	RegistrationsCeiling = "registrar.registrations.ceiling"
	// registrar_authorization_refusals_total
	AuthorizationRefusals = "registrar.authorization.refusals"
)

// AuthorizationReasons are the reason label's values: the four refusals of
// the caller policies, in the order StockStats.Refusals counts them (the
// verbs', registrar.AuthorizationReasons).
var AuthorizationReasons = registrar.AuthorizationReasons

// ComponentStock is one configured component's live registrations.
type ComponentStock struct {
	Component string
	// Live is its live registrations, every host together.
	Live uint64
	// BusiestHost is the most live registrations one host holds of it:
	// what max_instances_per_host bounds.
	BusiestHost uint64
	// Ceiling is its max_instances_per_host, 0 for none.
	Ceiling uint32
}

// StockStats is what RegisterStock observes.
type StockStats struct {
	// Components are the configured components, each once.
	Components []ComponentStock
	// Refusals counts the calls refused by the caller policies, by verb
	// and by the index of their reason in AuthorizationReasons; limited
	// refusals (no record written) included.
	Refusals [vocab.NumVerbs][len(AuthorizationReasons)]uint64
}

// RegisterStock registers, on mp (nil means a no-op provider):
//
//   - registrar.registrations (gauge, {registration}, label component):
//     the live registrations of each configured component, all hosts
//     together;
//   - registrar.registrations.busiest_host (gauge, {registration}, label
//     component): the most live registrations one host holds of the
//     component;
//   - registrar.registrations.ceiling (gauge, {registration}, label
//     component): the component's max_instances_per_host, for each
//     component that has one: a per-host ceiling, which busiest_host
//     approaches;
//   - registrar.authorization.refusals (counter, {invocation}, labels verb
//     and reason: no_policy, out_of_scope, not_owner, instance_ceiling):
//     calls the caller policies refused, with no identity label.
//
// stats is called once per collection and must be safe from the
// collecting goroutine.
func RegisterStock(mp metric.MeterProvider, stats func() StockStats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterStock: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterStock")
	live := r.gauge(Registrations, "{registration}",
		"Live registrations of each configured component, every host together.")
	busiest := r.gauge(RegistrationsBusiestHost, "{registration}",
		"The most live registrations any one host holds of each configured component: what its max_instances_per_host bounds.")
	ceiling := r.gauge(RegistrationsCeiling, "{registration}",
		"A component's max_instances_per_host: the most live registrations one host may hold of it (only for components that set one).")
	refusals := r.counter(AuthorizationRefusals, "{invocation}",
		"Calls the caller policies refused, by verb and reason: no_policy (the identity matches no policy), out_of_scope, "+
			"not_owner (another identity's registration), instance_ceiling (a ceiling reached). Limited refusals included.")
	var refusalAttrs [vocab.NumVerbs][len(AuthorizationReasons)][]metric.ObserveOption
	for v := range vocab.NumVerbs {
		for i, reason := range AuthorizationReasons {
			refusalAttrs[v][i] = attrs(attribute.String("verb", vocab.Verb(v).String()), attribute.String("reason", reason.String()))
		}
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		for _, c := range s.Components {
			component := attrs(attribute.String("component", c.Component))
			o.ObserveInt64(live, toInt64(c.Live), component...)
			o.ObserveInt64(busiest, toInt64(c.BusiestHost), component...)
			if c.Ceiling != 0 {
				o.ObserveInt64(ceiling, int64(c.Ceiling), component...)
			}
		}
		for v := range s.Refusals {
			for i, n := range s.Refusals[v] {
				o.ObserveInt64(refusals, toInt64(n), refusalAttrs[v][i]...)
			}
		}
		return nil
	})
}
