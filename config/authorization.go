package config

import "strings"

// Warning is a finding about a configuration that is valid but likely not
// what its operator means: Load accepts it, and serve and config check
// print it. Warnings are safe to copy and compare.
type Warning struct {
	// Key is the dotted key the warning concerns, e.g.
	// "registrar.socket_group".
	Key string
	// Message is one line that starts with Key and says what follows
	// from the configuration and how to fix it.
	Message string
}

// String returns w.Message.
func (w Warning) String() string { return w.Message }

// AuthorizationWarnings returns one warning for each listener of c that
// admits callers other than the operators (root and the daemon's own uid
// on the unix socket) while no caller policy can match them, in
// documentation order: every such caller would be refused no_policy.
//
//   - registrar.socket_group lets the group's members connect
//     (unix-peer:uid=<uid>); a policy can match one when it names a
//     unix-peer identity other than root's, or a prefix such an identity
//     can start with ("unix-peer:", "unix-peer:uid=1", or the catch-all
//     "").
//   - registrar.tls_listen lets every holder of a client certificate the
//     CA signs connect (registrar-client:dns:… or registrar-client:uri:…);
//     a policy can match one when it names such an identity, or a prefix
//     such an identity can start with.
//
// A socket systemd hands over is shared by its unit's SocketGroup=, which
// the configuration does not show: no warning can be given for it (the
// package's configuration names a policy for unix callers). The daemon's
// own uid is not known here: a policy that names only it counts as naming
// a group member. AuthorizationWarnings reads c only; it is nil when there
// is nothing to say.
func (c Config) AuthorizationWarnings() []Warning {
	r := &c.Registrar
	var out []Warning
	if r.SocketGroup != "" && !anyPolicy(r.Callers, unixMember) {
		out = append(out, Warning{Key: "registrar.socket_group", Message: "registrar.socket_group " + quote(r.SocketGroup) +
			" lets the group's members call the daemon, but no caller policy can match them (a unix-peer:uid=<uid> identity other than root's): until one does, every member of the group is refused no_policy; " +
			`add a [registrar.callers.<name>] policy with identity_prefixes = ["unix-peer:"] (every local caller) or identities = ["unix-peer:uid=<uid>"] (each member), scoped with the scope_* keys`})
	}
	if r.TLSListen != "" && !anyPolicy(r.Callers, certHolder) {
		out = append(out, Warning{Key: "registrar.tls_listen", Message: "registrar.tls_listen " + quote(r.TLSListen) +
			" lets every holder of a client certificate the CA signs call the daemon, but no caller policy can match them (a registrar-client: identity): until one does, every certificate holder is refused no_policy; " +
			`add a [registrar.callers.<name>] policy with identity_prefixes = ["registrar-client:"] (every certificate) or your certificates' own prefix (e.g. "registrar-client:uri:spiffe://example.org/host/"), scoped with the scope_* keys`})
	}
	return out
}

// anyPolicy reports whether one of ps names an identity, or a prefix, for
// which can(id, prefix) holds.
func anyPolicy(ps []CallerPolicy, can func(id string, prefix bool) bool) bool {
	for _, p := range ps {
		for _, id := range p.Identities {
			if can(id, false) {
				return true
			}
		}
		for _, pre := range p.IdentityPrefixes {
			if can(pre, true) {
				return true
			}
		}
	}
	return false
}

// unixMember reports whether id, an exact identity or (prefix) an identity
// prefix, can match the identity of a unix socket caller that is not
// root: unix-peer:uid= and a uid in decimal without a leading zero, not 0.
func unixMember(id string, prefix bool) bool {
	if prefix && strings.HasPrefix(unixIdentityPrefix, id) {
		return true // "", "unix-peer:", "unix-peer:uid=": every uid
	}
	uid, ok := strings.CutPrefix(id, unixIdentityPrefix)
	if !ok || (uid == "" && !prefix) || strings.HasPrefix(uid, "0") {
		return false // another kind, or root (uids have no leading zero)
	}
	for i := 0; i < len(uid); i++ {
		if uid[i] < '0' || uid[i] > '9' {
			return false
		}
	}
	return true
}

// certHolder reports whether id, an exact identity or (prefix) an
// identity prefix, can match a client certificate's identity.
func certHolder(id string, prefix bool) bool {
	return strings.HasPrefix(id, certIdentityPrefix) || prefix && strings.HasPrefix(certIdentityPrefix, id)
}
