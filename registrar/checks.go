package registrar

import (
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
)

// ReservedPrefix is the service-name prefix reserved for the registrar's
// own services (compared case-insensitively).
const ReservedPrefix = "registrar-"

// MaxInstance is the largest instance number of a many-per-host component.
const MaxInstance = 999

// preDerivation runs the pure pre-derivation checks, in the spec's order:
// no I/O, no lock. It returns the first failing check's reason, or 0 when
// every check passed. spec and wrapTTL are checked for mint only.
func (v *Verbs) preDerivation(comps map[string]config.Multiplicity, serviceName, host, component string, instance uint32, mint *MintRequest) audit.Reason {
	switch {
	case !config.IsDNSLabel(serviceName):
		return audit.ReasonInvalidServiceName
	case !config.IsDNSLabel(host):
		return audit.ReasonInvalidHost
	case hasReservedPrefix(serviceName):
		return audit.ReasonReservedServiceName
	case mint != nil && mint.Spec.ServiceName != serviceName:
		return audit.ReasonSpecIdentityDisagreement
	}
	m, ok := comps[component]
	if !ok {
		return audit.ReasonComponentNotConfigured
	}
	if (m == config.ManyPerHost) != (instance != 0) || instance > MaxInstance {
		return audit.ReasonServiceInstanceMismatch
	}
	if mint != nil && (mint.WrapTTLSeconds < 1 || mint.WrapTTLSeconds > uint64(v.maxWrapTTLSeconds)) {
		return audit.ReasonInvalidWrapTTL
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
func derive(m config.Multiplicity, host, component string, instance uint32) (string, bool) {
	var id string
	switch m {
	case config.OnePerDeployment:
		id = component
	case config.OnePerHost:
		id = host + "-" + component
	case config.ManyPerHost:
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
