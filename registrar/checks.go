package registrar

import (
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// ReservedPrefix is the service-name prefix reserved for the registrar's
// own services (compared case-insensitively).
const ReservedPrefix = "registrar-"

// MaxInstance is the largest instance number of a many-per-host component.
const MaxInstance = 999

// preDerivation runs the pure pre-derivation checks, in the spec's order:
// no I/O, no lock. It returns the first failing check's reason, or 0 when
// every check passed. spec and wrapTTL are checked for mint only.
func (v *Verbs) preDerivation(comps map[string]vocab.Multiplicity, serviceName, host, component string, instance uint32, mint *MintRequest) vocab.Reason {
	switch {
	case !vocab.IsDNSLabel(serviceName):
		return vocab.ReasonInvalidServiceName
	case !vocab.IsDNSLabel(host):
		return vocab.ReasonInvalidHost
	case hasReservedPrefix(serviceName):
		return vocab.ReasonReservedServiceName
	case mint != nil && mint.Spec.ServiceName != serviceName:
		return vocab.ReasonSpecIdentityDisagreement
	}
	m, ok := comps[component]
	if !ok {
		return vocab.ReasonComponentNotConfigured
	}
	if mint != nil && mint.Spec.Component != component {
		// The spec names the registration it is stored with: its
		// component is what the registry keeps and the ceilings count.
		return vocab.ReasonSpecIdentityDisagreement
	}
	if (m == vocab.ManyPerHost) != (instance != 0) || instance > MaxInstance {
		return vocab.ReasonServiceInstanceMismatch
	}
	if mint != nil && (mint.WrapTTLSeconds < 1 || mint.WrapTTLSeconds > uint64(v.maxWrapTTLSeconds)) {
		return vocab.ReasonInvalidWrapTTL
	}
	return 0
}

func hasReservedPrefix(s string) bool {
	return len(s) >= len(ReservedPrefix) && strings.EqualFold(s[:len(ReservedPrefix)], ReservedPrefix)
}

// derive computes the registration id from the component's multiplicity:
// one-per-deployment → <component>; one-per-host → <host>-<component>;
// many-per-host → <host>-<component>-<NNN>. It reports false when the
// result is not 1–131 octets of [a-z0-9-] (derived_key_invalid).
func derive(m vocab.Multiplicity, host, component string, instance uint32) (string, bool) {
	var id string
	switch m {
	case vocab.OnePerDeployment:
		id = component
	case vocab.OnePerHost:
		id = host + "-" + component
	case vocab.ManyPerHost:
		n := strconv.FormatUint(uint64(instance), 10)
		for len(n) < 3 {
			n = "0" + n
		}
		id = host + "-" + component + "-" + n
	default:
		return "", false
	}
	if len(id) < 1 || len(id) > audit.MaxRegistrationIDBytes {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return "", false
		}
	}
	return id, true
}
