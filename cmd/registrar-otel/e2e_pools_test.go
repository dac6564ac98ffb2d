package main

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// The attack of issue 27, item 5: client certificates held the limiter's
// one shared map full of drained entries, drained the overflow bucket,
// and the unix control plane's next mint was answered RegistrarBusy. The
// unix socket's callers have a pool of their own now: 300 drained mTLS
// identities (more than the map's 256 entries) leave it admitted.
func TestEndToEndDrainedCertificateIdentitiesLeaveTheUnixCallerAdmitted(t *testing.T) {
	p := newE2EPKI(t)
	// One token an hour: one admitted mint drains an identity.
	d, addr := startTLSDaemon(t, p, "rate_limit_admission_burst = 1\nrate_limit_admission_refill_interval_ms = 3600000\n")
	const identities = 300
	req := wire.MintRequest{ServiceName: "review", Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"}, WrapTTL: 60}
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
