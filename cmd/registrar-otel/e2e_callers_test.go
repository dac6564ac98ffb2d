package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// callersLimits is the acceptance deployment of issue 35: the default
// admission burst 8 (a token an hour, so nothing refills during the test),
// the control plane (this test's uid over the unix socket) on a wave-sized
// policy of 1,600, and the agents (client certificates under
// spiffe://registrar.test/agent/) on a policy of their own, 8 to start.
func callersLimits(agentBurst int) string {
	return fmt.Sprintf(`rate_limit_admission_burst = 8
rate_limit_admission_refill_interval_ms = 3600000

[registrar.callers.control-plane]
identities = ["unix-peer:uid=%d"]
rate_limit_admission_burst = 1600

[registrar.callers.agents]
identity_prefixes = ["registrar-client:uri:spiffe://registrar.test/agent/"]
rate_limit_admission_burst = %d
`, os.Getuid(), agentBurst)
}

// TestEndToEndCallerPolicies: a wave of 200 hosts × 8 modules from the
// control plane is throttled 0 times and every answer states the
// control plane's own policy; an agent's ninth mint is throttled; a reload
// that lowers the agents' burst applies at once and mints no token; limits
// show names each identity's policy, and limits reset refills one
// identity and is in the audit store.
func TestEndToEndCallerPolicies(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, callersLimits(8))
	unix := wire.NewUnixClient(d.socket, wire.WithTimeout(e2eIODeadline))
	defer unix.CloseIdleConnections()
	agentClient := func(name string) *wire.Client {
		cert := p.Client(t, "spiffe://registrar.test/agent/"+name)
		return wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithTimeout(e2eIODeadline))
	}

	// The wave: 1,600 mints at 32 in flight.
	var throttled, failed atomic.Int64
	var firstBad atomic.Value
	work := make(chan wire.MintRequest)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range work {
				res, err := unix.Mint(context.Background(), req)
				switch {
				case err != nil:
					failed.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
				case res.StatusCode == 429:
					throttled.Add(1)
				case !res.OK():
					failed.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("%d %s %s", res.StatusCode, res.ErrorID, res.Detail))
				case res.RateLimitPolicy == nil || res.RateLimit == nil:
					failed.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("no RateLimit fields (%v)", res.RateLimitError))
				default:
					if pol, ok := res.RateLimitPolicy.Lookup("control-plane"); !ok || pol.Quota != 1600 {
						failed.Add(1)
						firstBad.CompareAndSwap(nil, fmt.Sprintf("RateLimit-Policy %+v, want control-plane q=1600", res.RateLimitPolicy))
					}
				}
			}
		}()
	}
	for h := range 200 {
		for m := range 8 {
			work <- reviewMint(fmt.Sprintf("h%d", h+1), uint32(m+1))
		}
	}
	close(work)
	wg.Wait()
	if throttled.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("the control plane's wave: %d throttled, %d failed (first: %v), want 0 and 0", throttled.Load(), failed.Load(), firstBad.Load())
	}

	// An agent: eight mints, the ninth throttled, under the agents policy.
	a1 := agentClient("a1")
	defer a1.CloseIdleConnections()
	for i := range 9 {
		res, err := a1.Mint(context.Background(), reviewMint("agent-host-1", uint32(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 8; res.OK() != want {
			t.Fatalf("agent mint %d: %d %s, want OK %v", i+1, res.StatusCode, res.ErrorID, want)
		}
		if l, ok := res.RateLimit.Lookup("agents"); !ok || l.Remaining != uint64(max(0, 7-i)) {
			t.Fatalf("agent mint %d: RateLimit %+v, want agents r=%d", i+1, res.RateLimit, max(0, 7-i))
		}
	}
	// A second agent spends three of its eight.
	a2 := agentClient("a2")
	defer a2.CloseIdleConnections()
	for i := range 3 {
		if res, err := a2.Mint(context.Background(), reviewMint("agent-host-2", uint32(i+1))); err != nil || !res.OK() {
			t.Fatalf("agent 2 mint %d: %v %+v", i+1, err, res)
		}
	}

	// The reload lowers the agents' burst to 2: agent 2 (5 held) keeps 2,
	// agent 1 (drained) stays drained, a new agent gets 2.
	d.rewrite(callersLimits(8), callersLimits(2), 0o600)
	if code, out, errOut := d.run("reload", "--config", d.config); code != 0 || !strings.Contains(out, "registrar.callers.agents") {
		t.Fatalf("reload: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	admittedOf := func(c *wire.Client, host string, n int) int {
		ok := 0
		for i := range n {
			res, err := c.Mint(context.Background(), reviewMint(host, uint32(100+i)))
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() {
				ok++
			}
		}
		return ok
	}
	if got := admittedOf(a1, "agent-host-1", 3); got != 0 {
		t.Errorf("the drained agent was admitted %d times after the reload: the reload minted tokens", got)
	}
	if got := admittedOf(a2, "agent-host-2", 5); got != 2 {
		t.Errorf("agent 2 (5 held) was admitted %d times after lowering the burst to 2, want 2", got)
	}
	a3 := agentClient("a3")
	defer a3.CloseIdleConnections()
	if got := admittedOf(a3, "agent-host-3", 5); got != 2 {
		t.Errorf("a new agent was admitted %d times, want the new burst 2", got)
	}

	// limits show and reset, as this uid (root, or the daemon's own).
	code, out, errOut := d.run("limits", "show", "--socket", d.socket, "--identity", "registrar-client:uri:spiffe://registrar.test/agent/a1", "--json")
	if code != 0 {
		t.Fatalf("limits show: exit %d\n%s\n%s", code, out, errOut)
	}
	var show wire.LimitsAnswer
	if err := json.Unmarshal([]byte(out), &show); err != nil || len(show.Identities) != 1 || show.Identities[0].Policy != "agents" {
		t.Fatalf("limits show: %v\n%s", err, out)
	}
	code, out, errOut = d.run("limits", "reset", "--socket", d.socket, "--identity", "registrar-client:uri:spiffe://registrar.test/agent/a1", "--verb", "mint", "--bucket", "admission")
	if code != 0 || !strings.Contains(out, "recorded in the audit store") {
		t.Fatalf("limits reset: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := admittedOf(a1, "agent-host-1", 5); got != 2 {
		t.Errorf("agent 1 after its reset was admitted %d times, want the burst 2", got)
	}
	_, rawScan, _ := d.run("audit", "scan", "--dir", d.auditDir, "--json")
	var scan struct {
		Admin struct {
			ByAction map[string]uint64 `json:"by_action"`
		} `json:"admin"`
	}
	if err := json.Unmarshal([]byte(rawScan), &scan); err != nil || scan.Admin.ByAction["limits_reset"] != 1 {
		t.Fatalf("audit scan: %v, want one limits_reset admin record\n%s", err, rawScan)
	}
	d.stop()
}

// TestEndToEndAPacedWaveMeetsNo429: against the real daemon with a small
// bucket (burst 4, a token every 50 ms), a wave of 24 mints at
// concurrency 4 paced by the RateLimit fields is throttled 0 times and
// every mint is admitted, where the same wave unpaced meets 429s.
func TestEndToEndAPacedWaveMeetsNo429(t *testing.T) {
	d := startDaemon(t, `rate_limit_admission_burst = 4
rate_limit_admission_refill_interval_ms = 50`, "")
	wave := func(pace bool) loadSummary {
		args := []string{"load", "wave", "--socket", d.socket, "--audit-dir", "-", "--json", "--hosts", "6", "--modules-per-host", "4",
			"--component", "review", "--concurrency", "4", "--settle", "0s", "--progress", "off"}
		if pace {
			args = append(args, "--pace")
		}
		code, out, errOut := d.run(args...)
		var sum loadSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 && code != 1 {
			t.Fatalf("load wave (pace %v): exit %d, %v\nstdout: %s\nstderr: %s", pace, code, err, out, errOut)
		}
		return sum
	}
	unpaced := wave(false)
	if unpaced.Throttled == 0 {
		t.Fatalf("the unpaced wave met no 429 (%+v): the test cannot tell pacing from luck", unpaced)
	}
	paced := wave(true)
	if paced.Throttled != 0 || paced.Admitted != paced.Target || paced.Pacing == nil {
		t.Fatalf("the paced wave: %d throttled, %d of %d admitted, pacing %+v; want 0 throttled, all admitted", paced.Throttled, paced.Admitted, paced.Target, paced.Pacing)
	}
	t.Logf("unpaced: %d throttled in %.1f s; paced: %.1f s, pacing %+v", unpaced.Throttled, unpaced.ElapsedSeconds, paced.ElapsedSeconds, *paced.Pacing)
	d.stop()
}
