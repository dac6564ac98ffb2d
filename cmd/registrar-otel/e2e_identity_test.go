package main

// End-to-end attacks on the identities of mTLS callers (issue 27, items 5
// and 7): a spoofed certificate is not the real one, and drained
// certificate identities leave the unix caller its own pool.

import (
	"context"
	"crypto/x509"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// oneMintAnHour is a daemon's [registrar] lines for one admitted mint an
// hour per identity: a second mint on the same identity is limited.
const oneMintAnHour = "rate_limit_admission_burst = 1\nrate_limit_admission_refill_interval_ms = 3600000\n"

// The attack of issue 27, item 7, against the real daemon: a certificate
// with DNS SAN attacker.example.net and a scheme-less URI SAN
// control-plane.example.net was audited as the real control-plane's
// identity and spent its buckets. Now it is refused (no_identity), a URI
// SAN naming that host is an identity of its own, and only a respelling of
// the real DNS name shares the real certificate's bucket.
func TestEndToEndASANSpoofingCertificateIsNotTheRealOne(t *testing.T) {
	p := newE2EPKI(t)
	// One admitted mint an hour per identity: a second mint on the same
	// identity is limited, one on a fresh identity admitted.
	d, addr := startTLSDaemon(t, p, oneMintAnHour)
	mint := func(t *testing.T, uris, dns []string, instance uint32) *wire.Response {
		t.Helper()
		cert := p.Issue(t, pkitest.Options{URIs: uris, DNS: dns, Usage: x509.ExtKeyUsageClientAuth})
		c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
		defer c.CloseIdleConnections()
		res, err := c.Mint(context.Background(), reviewMint("h1", instance))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := mint(t, nil, []string{"control-plane.example.net"}, 1); !res.OK() {
		t.Fatalf("the real certificate's mint: %d %s %s", res.StatusCode, res.ErrorID, res.Detail)
	}
	before := rejectedIn(d.scrape(), "tls", "no_identity")
	res := mint(t, []string{"control-plane.example.net"}, []string{"attacker.example.net"}, 2)
	if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed || !strings.Contains(res.Detail, "no scheme") {
		t.Fatalf("the spoofing certificate's mint: %d %s %q, want 400 RequestMalformed naming the missing scheme", res.StatusCode, res.ErrorID, res.Detail)
	}
	res = mint(t, nil, []string{"control-plane.example.net\n\x1b[0m"}, 2)
	if res.StatusCode != 400 || !strings.Contains(res.Detail, "control character") {
		t.Fatalf("a DNS SAN with a newline and ESC: %d %s %q, want refused naming the control character", res.StatusCode, res.ErrorID, res.Detail)
	}
	if after := rejectedIn(d.scrape(), "tls", "no_identity"); after != before+2 {
		t.Errorf("no_identity went from %v to %v, want two more", before, after)
	}
	// A URI SAN naming the host is an identity of its own: a fresh bucket.
	if res := mint(t, []string{"dns://control-plane.example.net"}, []string{"control-plane.example.net"}, 3); !res.OK() {
		t.Fatalf("the URI certificate's mint: %d %s %s, want admitted on its own bucket", res.StatusCode, res.ErrorID, res.Detail)
	}
	// A respelling of the real name is the real identity: its bucket is spent.
	if res := mint(t, nil, []string{"CONTROL-PLANE.Example.NET."}, 4); res.ErrorID != wire.RegistrarBusy {
		t.Fatalf("the respelled real name's mint: %d %s %s, want RegistrarBusy on the real identity's spent bucket", res.StatusCode, res.ErrorID, res.Detail)
	}

	ids := map[string]int{}
	for _, r := range readAudit(t, d.auditDir) {
		ids[r.CallerIdentity]++
	}
	for _, want := range []string{"registrar-client:dns:control-plane.example.net", "registrar-client:uri:dns://control-plane.example.net"} {
		if ids[want] == 0 {
			t.Errorf("no audit record of %q; the records' identities: %v", want, ids)
		}
	}
	for id := range ids {
		if id == "registrar-client:control-plane.example.net" || strings.Contains(id, "attacker") || strings.ContainsAny(id, "\n\x1b") {
			t.Errorf("an audit record of identity %q", id)
		}
	}
}

// The attack of issue 27, item 5: client certificates held the limiter's
// one shared map full of drained entries, drained the overflow bucket,
// and the unix control plane's next mint was answered RegistrarBusy. The
// unix socket's callers have a pool of their own now: 300 drained mTLS
// identities (more than the map's 256 entries) leave it admitted.
func TestEndToEndDrainedCertificateIdentitiesLeaveTheUnixCallerAdmitted(t *testing.T) {
	p := newE2EPKI(t)
	// One token an hour: one admitted mint drains an identity.
	d, addr := startTLSDaemon(t, p, oneMintAnHour)
	const identities = 300
	req := reviewMint("h1", 1)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		busy int
		next = make(chan int)
	)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				cert := p.Client(t, "spiffe://registrar.test/attacker-"+strconv.Itoa(i))
				c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
				for range 2 { // the second is limited: the entry is drained
					res, err := c.Mint(context.Background(), req)
					if err != nil {
						t.Errorf("identity %d: %v", i, err)
						return
					}
					if res.ErrorID == wire.RegistrarBusy {
						mu.Lock()
						busy++
						mu.Unlock()
					}
				}
				c.CloseIdleConnections()
			}
		})
	}
	for i := range identities {
		next <- i
	}
	close(next)
	wg.Wait()
	// Every identity's second mint was limited, and the identities beyond
	// the map's cap were limited on the drained overflow bucket at once.
	if busy < identities {
		t.Fatalf("%d RegistrarBusy answers to the attackers, want at least %d: the map was not drained", busy, identities)
	}
	unixCaller := wire.NewUnixClient(d.socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	res, err := unixCaller.Mint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ErrorID == wire.RegistrarBusy || !res.OK() {
		t.Fatalf("the unix caller's mint after %d drained certificate identities: %d %s %s, want admitted", identities, res.StatusCode, res.ErrorID, res.Detail)
	}
}
