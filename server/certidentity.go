package server

import (
	"crypto/tls"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/wire"
)

// Certificate identities are typed and canonical. The identity names the
// kind of SAN it came from, so a URI SAN can never spell the identity a
// DNS SAN has (a certificate with DNS SAN attacker.example.net and a
// scheme-less URI SAN control-plane.example.net was once audited as the
// real control-plane.example.net); and the spellings one name allows
// (upper-case, a trailing dot, needless percent-encoding) all give its one
// identity, so a certificate holder cannot mint fresh buckets or a fresh
// name in the audit trail by respelling its SAN:
//
//	registrar-client:uri:<scheme>://<host><path>   from the first URI SAN
//	registrar-client:dns:<name>                    from the first DNS SAN
//
// Which SAN: a certificate with any URI SAN is identified by its first
// URI SAN, and its DNS SANs are ignored; a certificate without one by its
// first DNS SAN. A first SAN that is not acceptable leaves the connection
// without an identity (no_identity, with the reason): the next SAN is
// never tried, so a malformed SAN cannot quietly turn a certificate into
// another identity.
//
// A URI SAN needs a scheme and a host (spiffe://trust-domain/path; a
// scheme-less or opaque URI such as urn:x is refused). The scheme and the
// host are lower-cased, the host must be a DNS name or an IP literal, with
// no port and no user information. The path is kept as it is except for
// its percent-encoding, which is normalised (decoded and re-encoded the one
// way Go's url package writes it: c%70 is cp); a path with an encoded
// slash (%2F, which decoding would turn into a segment boundary) or a dot
// segment (. or ..) is refused. A query or a fragment is refused, not
// stripped: a certificate carrying one is not mapped onto the identity of
// a certificate without it.
//
// A DNS SAN (and a URI host) is lower-cased, one trailing dot is dropped,
// and it must be a DNS name: labels of letters, digits, '-' and '_', each
// 1 to 63 bytes, at most 253 bytes in all. A wildcard names no single
// caller and is refused.
//
// Control characters (below 0x20, and 0x7f) anywhere are refused; no
// problem text ever echoes the SAN, so none reaches a log line.

const (
	certIdentityPrefix = "registrar-client:"
	uriIdentityPrefix  = certIdentityPrefix + "uri:"
	dnsIdentityPrefix  = certIdentityPrefix + "dns:"
)

// Bounds of a DNS name (RFC 1035 §2.3.4, without the trailing dot).
const (
	maxDNSNameBytes  = 253
	maxDNSLabelBytes = 63
)

// tlsIdentity is the typed, canonical identity of the verified client
// certificate (see above), or the problem that leaves it without one.
func tlsIdentity(cs *tls.ConnectionState) (id, problem string) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", "the client certificate was not verified"
	}
	leaf := cs.VerifiedChains[0][0]
	if leaf == nil {
		return "", "the client certificate was not verified"
	}
	switch {
	case len(leaf.URIs) > 0:
		canon, problem := canonicalURI(leaf.URIs[0])
		if problem != "" {
			return "", "the client certificate's first URI SAN " + problem
		}
		id = uriIdentityPrefix + canon
	case len(leaf.DNSNames) > 0:
		canon, problem := canonicalDNSName(leaf.DNSNames[0])
		if problem != "" {
			return "", "the client certificate's first DNS SAN " + problem
		}
		id = dnsIdentityPrefix + canon
	default:
		return "", "the client certificate has no URI or DNS subject alternative name to identify the caller"
	}
	if problem := checkIdentity(id); problem != "" {
		return "", problem
	}
	return id, ""
}

// canonicalURI returns u's canonical form, or what makes it unacceptable
// as an identity (a phrase completing "the first URI SAN …").
func canonicalURI(u *url.URL) (string, string) {
	switch {
	case u == nil:
		return "", "could not be read"
	case hasControl(u.Scheme) || hasControl(u.Opaque) || hasControl(u.Host) || hasControl(u.Path) ||
		hasControl(u.RawQuery) || hasControl(u.Fragment):
		return "", "contains a control character"
	case u.Scheme == "":
		return "", "has no scheme (want scheme://host/path, e.g. spiffe://example.net/control-plane)"
	case u.Opaque != "" || u.Host == "":
		return "", "has no host (want scheme://host/path)"
	case u.User != nil:
		return "", "carries user information"
	case u.RawQuery != "" || u.ForceQuery:
		return "", "has a query (refused, not stripped)"
	case u.Fragment != "" || u.RawFragment != "":
		return "", "has a fragment (refused, not stripped)"
	case u.Port() != "":
		return "", "has a port in its host"
	}
	host, problem := canonicalHost(u)
	if problem != "" {
		return "", problem
	}
	if u.RawPath != "" && strings.Contains(strings.ToUpper(u.RawPath), "%2F") {
		return "", "has an encoded slash (%2F) in its path"
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "", "has a dot segment in its path"
		}
	}
	// The path alone, re-encoded: EscapedPath of a URL without RawPath is
	// the one encoding Go writes for it.
	path := (&url.URL{Path: u.Path}).EscapedPath()
	return strings.ToLower(u.Scheme) + "://" + host + path, ""
}

// canonicalHost returns u's host lower-cased: a DNS name, or an IP literal
// in its canonical form (IPv6 in brackets).
func canonicalHost(u *url.URL) (string, string) {
	name := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		addr, err := netip.ParseAddr(name)
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", "has a host in brackets that is not an IPv6 address"
		}
		return "[" + addr.String() + "]", ""
	}
	if addr, err := netip.ParseAddr(name); err == nil {
		return addr.String(), ""
	}
	canon, problem := canonicalDNSName(name)
	if problem != "" {
		return "", "has a host that " + problem
	}
	return canon, ""
}

// canonicalDNSName returns name lower-cased without a trailing dot, or
// what makes it no DNS name (a phrase completing "the first DNS SAN …").
func canonicalDNSName(name string) (string, string) {
	if hasControl(name) {
		return "", "contains a control character"
	}
	name = strings.TrimSuffix(name, ".")
	switch {
	case name == "":
		return "", "is empty"
	case len(name) > maxDNSNameBytes:
		return "", "is longer than 253 bytes"
	case strings.HasPrefix(name, "*"):
		return "", "is a wildcard, which names no single caller"
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", "has an empty label"
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return "", "has a character other than a letter, a digit, '-', '_' or '.'"
		}
		label++
		if label > maxDNSLabelBytes {
			return "", "has a label longer than 63 bytes"
		}
	}
	if label == 0 {
		return "", "has an empty label"
	}
	return strings.ToLower(name), ""
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// checkIdentity returns the problem with a certificate-derived identity,
// or "".
func checkIdentity(id string) string {
	if len(id) > wire.MaxIdentityBytes {
		return "the client certificate's identity is longer than " + strconv.Itoa(wire.MaxIdentityBytes) + " bytes"
	}
	return ""
}
