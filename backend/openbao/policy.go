package openbao

import (
	"fmt"
	"path"
	"strconv"
	"time"
)

// ServicePolicyPrefix starts the name of every per-service policy: the
// operator writes registrar-otel-service-<service_name> once per service
// (ServicePolicy shows it), and each mint attaches the one of its spec's
// service to the registration's role. The registrar never writes a policy.
const ServicePolicyPrefix = "registrar-otel-service-"

// ServicePolicyName returns the policy a role of service svc carries:
// registrar-otel-service-<svc>.
func ServicePolicyName(svc string) string { return ServicePolicyPrefix + svc }

// ServicePolicy returns the policy the operator writes, once, as
// ServicePolicyName(svc): read on the service's own secrets,
// <kv_mount>/data/<kv_prefix>/services/<svc>/*, and nothing else. svc must
// be [a-z0-9-] (the verbs' service names are); the text is only ever read
// by the operator's `bao policy write`, never sent by the registrar.
func ServicePolicy(kvMount, kvPrefix, svc string) string {
	return fmt.Sprintf(`# %s: written once by the operator, attached by registrar-otel
# to the AppRole role of every registration of service %s.
path %q {
  capabilities = ["read"]
}
`, ServicePolicyName(svc), svc, path.Join(kvMount, "data", kvPrefix, "services", svc)+"/*")
}

// TokenPolicy returns the ACL policy the registrar's own token needs, and
// all it may hold, on a server with the given mounts, prefix and secret id
// settings (openbao.secret_id_ttl_seconds and openbao.secret_id_num_uses:
// the values the backend writes; zero means the defaults, 1 h and 1):
//
//   - the bindings: claim, read, activate (create, read, update) and delete
//     every version (metadata delete), one path segment below bindings/,
//     and list them (the instance ceilings' count at start: the metadata
//     path bindings/ itself, list only);
//   - the roles of the AppRole mount, one segment below role/: write them
//     only with token_policies one registrar-otel-service-* policy (no
//     comma, so no second policy), bind_secret_id true and exactly these
//     secret id TTL and uses (allowed_parameters: any other parameter is
//     refused), and delete them; read a role id (never write one); issue a
//     secret id only response-wrapped (min_wrapping_ttl) and with no
//     parameter but an empty metadata; list a role's secret id accessors
//     (response-wrapped too: min_wrapping_ttl covers the path's every
//     operation) and destroy a secret id by its accessor (a mint destroys every one
//     but its own);
//   - its own token: lookup-self, renew-self, and capabilities-self (for
//     `registrar-otel openbao check`).
//
// Nothing else: no policy (sys/policies/acl) at all, no custom secret id,
// no chosen role id, no service's secrets. The role paths cover every role
// of the mount (`+` matches one whole segment, not a name prefix), so the
// mount must be the registrar's alone. The documentation shows it for the
// defaults, and the integration tests run every answer with a token holding
// only it and see each escalation refused by the server.
func TokenPolicy(kvMount, kvPrefix, approleMount string, secretIDTTL time.Duration, secretIDNumUses uint32) string {
	if secretIDTTL <= 0 {
		secretIDTTL = time.Hour
	}
	if secretIDNumUses == 0 {
		secretIDNumUses = 1
	}
	bindings := path.Join(kvMount, "data", kvPrefix, "bindings")
	meta := path.Join(kvMount, "metadata", kvPrefix, "bindings")
	role := path.Join("auth", approleMount, "role")
	return fmt.Sprintf(`# The registrar's token (registrar-otel openbao check verifies it holds
# exactly this). It writes no policy: each role carries the operator's
# registrar-otel-service-<service> policy.
path "%[1]s/+" {
  capabilities = ["create", "read", "update"]
}
path "%[2]s/+" {
  capabilities = ["delete"]
}
path "%[2]s/" {
  capabilities = ["list"]
}
# Every role of this AppRole mount, which must be the registrar's alone.
# Parameter values are exact (numbers as strings): what the backend writes.
path "%[3]s/+" {
  capabilities = ["create", "update", "delete"]
  allowed_parameters = {
    "token_policies"     = ["%[4]s*"]
    "bind_secret_id"     = [true]
    "secret_id_ttl"      = ["%[5]s"]
    "secret_id_num_uses" = ["%[6]d"]
  }
  denied_parameters = {
    "token_policies" = ["*,*"]
  }
}
path "%[3]s/+/role-id" {
  capabilities = ["read"]
}
path "%[3]s/+/secret-id" {
  capabilities     = ["list", "update"]
  min_wrapping_ttl = "1s"
  allowed_parameters = {
    "metadata" = [""]
  }
}
path "%[3]s/+/secret-id-accessor/destroy" {
  capabilities = ["update"]
  allowed_parameters = {
    "secret_id_accessor" = []
  }
}
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
path "auth/token/renew-self" {
  capabilities = ["update"]
}
path "sys/capabilities-self" {
  capabilities = ["update"]
}
`, bindings, meta, role, ServicePolicyPrefix, secondsText(secretIDTTL), secretIDNumUses)
}

// secondsText is d in whole seconds as the backend writes a TTL: "3600s".
func secondsText(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}
