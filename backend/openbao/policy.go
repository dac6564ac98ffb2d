package openbao

import "fmt"

// TokenPolicy returns the least-privilege ACL policy the registrar's own
// token needs on a server with the given mounts and prefix: read, claim,
// activate and delete the bindings; write and delete the
// bootroot-service-* policies; and manage the bootroot-service-* AppRole
// roles, read their role ids and issue their secret ids. Nothing else: not
// the services' secrets, not other policies or roles, not sys/ beyond the
// policies it owns. The documentation shows it for the default mounts, and
// the integration tests run every verb with a token holding only it.
//
// The token can still write any rules into a bootroot-service-* policy and
// attach it to a role it then logs in with; the server cannot restrict a
// policy's content. Guard the token accordingly.
func TokenPolicy(kvMount, kvPrefix, approleMount string) string {
	return fmt.Sprintf(`# The registrar's token: bindings, and the bootroot-service-* policies and
# AppRole roles it creates. Nothing else.
path "%[1]s/data/%[2]s/bindings/*" {
  capabilities = ["create", "read", "update"]
}
path "%[1]s/metadata/%[2]s/bindings/*" {
  capabilities = ["delete"]
}
path "sys/policies/acl/%[4]s*" {
  capabilities = ["create", "update", "delete"]
}
# The role itself (write, delete), its role-id (read) and secret-id (update).
path "auth/%[3]s/role/%[4]s*" {
  capabilities = ["create", "read", "update", "delete"]
}
`, kvMount, kvPrefix, approleMount, RolePrefix)
}
