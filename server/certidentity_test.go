package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"testing"
)

// leafState is a verified connection state whose leaf has the given SANs.
// A URI that does not parse is a test bug.
func leafState(t *testing.T, uris, dns []string) *tls.ConnectionState {
	t.Helper()
	leaf := &x509.Certificate{DNSNames: dns}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("URI SAN %q: %v", s, err)
		}
		leaf.URIs = append(leaf.URIs, u)
	}
	return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
}

func TestCertificateIdentitiesAreTypedAndCanonical(t *testing.T) {
	for _, tc := range []struct {
		name      string
		uris, dns []string
		want      string // "" when refused
		problem   string // a part of the refusal's reason
	}{
		// Typed: the kind of SAN is part of the identity.
		{name: "DNS SAN", dns: []string{"control-plane.example.net"}, want: "registrar-client:dns:control-plane.example.net"},
		{name: "URI SAN", uris: []string{"spiffe://example.net/control-plane"}, want: "registrar-client:uri:spiffe://example.net/control-plane"},
		{name: "URI whose host is the DNS name", uris: []string{"dns://control-plane.example.net"}, want: "registrar-client:uri:dns://control-plane.example.net"},
		{name: "first URI SAN wins over every DNS SAN", uris: []string{"spiffe://example.net/a", "spiffe://example.net/b"}, dns: []string{"ctl.example"}, want: "registrar-client:uri:spiffe://example.net/a"},
		{name: "first DNS SAN without a URI SAN", dns: []string{"ctl.example", "other.example"}, want: "registrar-client:dns:ctl.example"},
		{name: "no SAN", problem: "no URI or DNS subject alternative name"},

		// The spoof of the review: a scheme-less URI beside a DNS SAN.
		{name: "scheme-less URI SAN", uris: []string{"control-plane.example.net"}, dns: []string{"attacker.example.net"}, problem: "first URI SAN has no scheme"},
		{name: "opaque URI SAN", uris: []string{"urn:control-plane"}, problem: "first URI SAN has no host"},
		{name: "URI SAN without a host", uris: []string{"file:///control-plane"}, problem: "has no host"},
		{name: "a bad first URI SAN is not skipped for the next", uris: []string{"control-plane.example.net", "spiffe://example.net/ok"}, problem: "has no scheme"},
		{name: "a bad first DNS SAN is not skipped for the next", dns: []string{"*.example.net", "ok.example.net"}, problem: "wildcard"},

		// Canonical: lower-case hosts and names.
		{name: "DNS SAN in capitals", dns: []string{"Control-Plane.Example.NET"}, want: "registrar-client:dns:control-plane.example.net"},
		{name: "DNS SAN all capitals", dns: []string{"CONTROL-PLANE"}, want: "registrar-client:dns:control-plane"},
		{name: "DNS SAN with a trailing dot", dns: []string{"control-plane.example.net."}, want: "registrar-client:dns:control-plane.example.net"},
		{name: "URI scheme and host in capitals", uris: []string{"SPIFFE://Example.NET/control-plane"}, want: "registrar-client:uri:spiffe://example.net/control-plane"},
		{name: "URI path keeps its case", uris: []string{"spiffe://example.net/Control-Plane"}, want: "registrar-client:uri:spiffe://example.net/Control-Plane"},
		{name: "URI with an empty port", uris: []string{"spiffe://example.net:/control-plane"}, want: "registrar-client:uri:spiffe://example.net/control-plane"},
		{name: "URI with an IPv6 host", uris: []string{"spiffe://[0:0::1]/x"}, want: "registrar-client:uri:spiffe://[::1]/x"},
		{name: "URI with an IPv4 host", uris: []string{"spiffe://192.0.2.7/x"}, want: "registrar-client:uri:spiffe://192.0.2.7/x"},

		// Percent-encoding in the path is normalised, never a new identity.
		{name: "needless percent-encoding", uris: []string{"spiffe://example.net/c%6Fntrol-%70lane"}, want: "registrar-client:uri:spiffe://example.net/control-plane"},
		{name: "lower-case hex", uris: []string{"spiffe://example.net/caf%c3%a9"}, want: "registrar-client:uri:spiffe://example.net/caf%C3%A9"},
		{name: "needed percent-encoding kept", uris: []string{"spiffe://example.net/a%20b"}, want: "registrar-client:uri:spiffe://example.net/a%20b"},
		{name: "encoded slash", uris: []string{"spiffe://example.net/a%2fb"}, problem: "encoded slash"},
		{name: "dot segment", uris: []string{"spiffe://example.net/a/../control-plane"}, problem: "dot segment"},
		{name: "single dot segment", uris: []string{"spiffe://example.net/./control-plane"}, problem: "dot segment"},

		// Query and fragment are refused, not stripped.
		{name: "query and fragment", uris: []string{"spiffe://example.net/control-plane?x=1#frag"}, problem: "has a query"},
		{name: "fragment", uris: []string{"spiffe://example.net/control-plane#frag"}, problem: "has a fragment"},
		{name: "empty query", uris: []string{"spiffe://example.net/control-plane?"}, problem: "has a query"},
		{name: "user information", uris: []string{"spiffe://admin@example.net/control-plane"}, problem: "user information"},
		{name: "port", uris: []string{"spiffe://example.net:8443/control-plane"}, problem: "port"},
		{name: "URI host not a DNS name", uris: []string{"spiffe://exa+mple.net/x"}, problem: "has a host that has a character other than"},

		// Control characters are refused, the SAN never echoed.
		{name: "DNS SAN with newline and ESC", dns: []string{"control-plane.example.net\n\x1b[31mforged"}, problem: "first DNS SAN contains a control character"},
		{name: "DNS SAN with DEL", dns: []string{"ctl\x7f.example"}, problem: "control character"},
		{name: "URI path with an encoded newline", uris: []string{"spiffe://example.net/a%0Ab"}, problem: "first URI SAN contains a control character"},
		{name: "URI path with an encoded ESC", uris: []string{"spiffe://example.net/a%1Bb"}, problem: "control character"},

		// The rest of what a DNS name is.
		{name: "empty DNS SAN", dns: []string{""}, problem: "is empty"},
		{name: "only a dot", dns: []string{"."}, problem: "is empty"},
		{name: "empty label", dns: []string{"a..example"}, problem: "empty label"},
		{name: "leading dot", dns: []string{".example"}, problem: "empty label"},
		{name: "two trailing dots", dns: []string{"example.."}, problem: "empty label"},
		{name: "space", dns: []string{"a b.example"}, problem: "character other than"},
		{name: "non-ASCII", dns: []string{"caf\u00e9.example"}, problem: "character other than"},
		{name: "label over 63 bytes", dns: []string{strings.Repeat("a", 64) + ".example"}, problem: "label longer than 63"},
		{name: "label of 63 bytes", dns: []string{strings.Repeat("a", 63) + ".example"}, want: "registrar-client:dns:" + strings.Repeat("a", 63) + ".example"},
		{name: "name over 253 bytes", dns: []string{strings.Repeat(strings.Repeat("a", 62)+".", 4) + "ab"}, problem: "longer than 253"},
		{name: "underscore", dns: []string{"_svc.example"}, want: "registrar-client:dns:_svc.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, problem := tlsIdentity(leafState(t, tc.uris, tc.dns))
			if tc.want != "" {
				if id != tc.want || problem != "" {
					t.Fatalf("got %q (problem %q), want %q", id, problem, tc.want)
				}
				return
			}
			if id != "" || !strings.Contains(problem, tc.problem) {
				t.Fatalf("got %q, problem %q; want no identity and a problem containing %q", id, problem, tc.problem)
			}
			for _, san := range append(append([]string{}, tc.uris...), tc.dns...) {
				if len(san) > 3 && strings.Contains(problem, san) {
					t.Fatalf("problem %q echoes the SAN %q", problem, san)
				}
			}
			if hasControl(problem) {
				t.Fatalf("problem %q holds a control character", problem)
			}
		})
	}
}

// Every spelling of one name is one identity; every respelling the review
// tried gives either that identity or none.
func TestRespelledSANsNeverMakeANewIdentity(t *testing.T) {
	for _, group := range []struct {
		want  string
		uris  []string
		dns   []string
		other []string // URIs refused outright
	}{
		{
			want: "registrar-client:dns:control-plane.example.net",
			dns:  []string{"control-plane.example.net", "Control-Plane.Example.NET", "CONTROL-PLANE.EXAMPLE.NET", "control-plane.example.net."},
		},
		{
			want:  "registrar-client:uri:spiffe://example.net/cp",
			uris:  []string{"spiffe://example.net/cp", "spiffe://Example.NET/cp", "SPIFFE://EXAMPLE.NET/cp", "spiffe://example.net/c%70", "spiffe://example.net/%63%70"},
			other: []string{"spiffe://example.net/cp?x=1#frag", "spiffe://example.net/cp?x=1", "spiffe://example.net/cp#frag"},
		},
	} {
		for _, d := range group.dns {
			if id, problem := tlsIdentity(leafState(t, nil, []string{d})); id != group.want {
				t.Errorf("DNS SAN %q: got %q (%s), want %q", d, id, problem, group.want)
			}
		}
		for _, u := range group.uris {
			if id, problem := tlsIdentity(leafState(t, []string{u}, nil)); id != group.want {
				t.Errorf("URI SAN %q: got %q (%s), want %q", u, id, problem, group.want)
			}
		}
		for _, u := range group.other {
			if id, _ := tlsIdentity(leafState(t, []string{u}, nil)); id != "" {
				t.Errorf("URI SAN %q: got %q, want it refused", u, id)
			}
		}
	}
}

// The canonical form of a URI identity is a fixed point: parsed again, it
// gives itself, so the identity is a function of the name alone.
func TestACanonicalURIIsItsOwnCanonicalForm(t *testing.T) {
	for _, s := range []string{"SPIFFE://Example.NET/c%70/caf%c3%a9/a%20b", "spiffe://[0::1]/x", "dns://CTL.example./x"} {
		id, problem := tlsIdentity(leafState(t, []string{s}, nil))
		if problem != "" {
			t.Fatalf("%q: %s", s, problem)
		}
		canon := strings.TrimPrefix(id, uriIdentityPrefix)
		again, problem := tlsIdentity(leafState(t, []string{canon}, nil))
		if again != id {
			t.Fatalf("%q gave %q, whose canonical form is %q (%s)", s, id, again, problem)
		}
	}
}

// TestDNSNamesAtTheirBoundsAndEdgeCharacters holds the edges of the DNS SAN
// rule: a name of exactly 253 bytes (and a label of exactly 63) is an
// identity, one byte more is refused; the first and last letter and digit
// of each range are allowed, the bytes just outside each range are not.
func TestDNSNamesAtTheirBoundsAndEdgeCharacters(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) // 63*3 + 61 + 3 dots
	if len(name253) != 253 {
		t.Fatalf("test bug: name253 is %d bytes", len(name253))
	}
	for _, tc := range []struct {
		name, in, want, problem string
	}{
		{name: "253 bytes", in: name253, want: name253},
		{name: "253 bytes and a trailing dot", in: name253 + ".", want: name253},
		{name: "254 bytes", in: name253 + "b", problem: "longer than 253 bytes"},
		{name: "a label of 63 bytes", in: label63 + ".example", want: label63 + ".example"},
		{name: "a label of 64 bytes", in: label63 + "a.example", problem: "label longer than 63 bytes"},
		{name: "the first and last of each range", in: "az.AZ.09.-_", want: "az.az.09.-_"},
		{name: "a digit-only name", in: "0123456789", want: "0123456789"},
		{name: "just before 'a'", in: "ctl`.example", problem: "a character other than"},
		{name: "just after 'z'", in: "ctl{.example", problem: "a character other than"},
		{name: "just before 'A'", in: "ctl@.example", problem: "a character other than"},
		{name: "just after 'Z'", in: "ctl[.example", problem: "a character other than"},
		{name: "just before '0'", in: "ctl/.example", problem: "a character other than"},
		{name: "just after '9'", in: "ctl:.example", problem: "a character other than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := canonicalDNSName(tc.in)
			switch {
			case tc.problem == "" && (problem != "" || got != tc.want):
				t.Errorf("canonicalDNSName(%q) = %q, %q; want %q accepted", tc.in, got, problem, tc.want)
			case tc.problem != "" && !strings.Contains(problem, tc.problem):
				t.Errorf("canonicalDNSName(%q) = %q, %q; want refused as %q", tc.in, got, problem, tc.problem)
			}
		})
	}
}
