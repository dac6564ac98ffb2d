package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// instancesLimits are the limits of TestTwoRegistrarsShareOneBudget's two
// daemons: a policy budget of 5 admissions and 4 recorded refusals, one
// more of each per second, shared by registrar.instances = 2 (each
// daemon: burst 2, one token per 2 s); a window far longer than the test,
// so every counted record is written by the shutdown flush.
const instancesLimits = `instances = 2
rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 1000
rate_limit_predecision_refusal_burst = 4
rate_limit_predecision_refusal_refill_interval_ms = 1000
rate_limit_coalesce_window_seconds = 3600`

var serviceInstanceRE = regexp.MustCompile(`target_info\{[^}]*service_instance_id="([^"]+)"`)

// TestTwoRegistrarsShareOneBudget is issue 38's acceptance of the limits
// rule: one caller spreading its mints over two daemons with
// registrar.instances = 2 is admitted no more than burst + rate × elapsed
// of its one policy (the elapsed time measured by the test around the
// whole run, so the bound holds whatever the scheduling), and the counted
// evidence summed over both audit stores equals the limited answers the
// caller saw: RegistrarBusy answers for admission; for the refusals, those
// the stores do not hold as outcome records. Each daemon's /metrics
// target_info carries a service.instance.id of its own.
func TestTwoRegistrarsShareOneBudget(t *testing.T) {
	daemons := []*daemonProc{startDaemon(t, instancesLimits, ""), startDaemon(t, instancesLimits, "")}
	ids := map[string]bool{}
	for _, d := range daemons {
		m := serviceInstanceRE.FindStringSubmatch(getBody(t, http.DefaultClient, d.metricsURL))
		if m == nil {
			t.Fatalf("%s: target_info carries no service_instance_id", d.metricsURL)
		}
		ids[m[1]] = true
	}
	if len(ids) != 2 {
		t.Fatalf("service.instance.id of the two daemons: %v, want two different ones", ids)
	}

	good := wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60}
	malformed := good
	malformed.ServiceName = "Not-A-Label!"
	const workers, perWorker = 4, 40
	var (
		mu                     sync.Mutex
		admitted, busy, refuse [2]int
		wg                     sync.WaitGroup
	)
	clients := []*wire.Client{wire.NewUnixClient(daemons[0].socket), wire.NewUnixClient(daemons[1].socket)}
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				// The caller spreads over both daemons, and mixes
				// derivable mints with malformed ones.
				n := (w + i) % 2
				req := good
				if (w+i/2)%2 == 1 {
					req = malformed
				}
				resp, err := clients[n].Mint(context.Background(), req)
				if err != nil {
					t.Errorf("mint through daemon %d: %v", n, err)
					return
				}
				mu.Lock()
				switch {
				case resp.OK():
					admitted[n]++
				case resp.ErrorID == wire.RegistrarBusy:
					busy[n]++
				case resp.ErrorID == wire.ServiceLabelInvalid:
					refuse[n]++
				default:
					t.Errorf("daemon %d: unexpected answer %s", n, resp.ErrorID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, d := range daemons {
		d.stop()
	}

	// The policy's budget: burst 5 and one token a second, for both
	// daemons together; each daemon alone holds 2 and one per 2 s.
	tokens := uint64(elapsed / time.Second)
	sum := func(a [2]int) uint64 { return uint64(a[0] + a[1]) }
	if bound := 5 + tokens; sum(admitted) > bound {
		t.Errorf("admitted %d mints (%v) in %v over two daemons, want at most burst 5 + %d refilled = %d", sum(admitted), admitted, elapsed, tokens, bound)
	}
	for n, a := range admitted {
		if bound := 2 + uint64(elapsed/(2*time.Second)); uint64(a) > bound {
			t.Errorf("daemon %d admitted %d, want at most its share: burst 2 + %d refilled", n, a, bound-2)
		}
	}
	if sum(busy) == 0 || sum(refuse) == 0 {
		t.Fatalf("the caller saw %d busy and %d refusals; the run did not reach both limits", sum(busy), sum(refuse))
	}

	var countedAdmission, countedRefusal, recordedRefusals uint64
	for _, d := range daemons {
		code, rep := d.scan()
		if code != 0 || rep.Anomalies {
			t.Fatalf("audit scan of %s: exit %d, %+v", d.auditDir, code, rep)
		}
		countedAdmission += rep.Limited["admission"].Count
		countedRefusal += rep.Limited["predecision_refusal"].Count
		// Every outcome record but the admitted mints' is a refusal
		// the daemon recorded instead of limiting it.
		recordedRefusals += rep.Records.Outcome
	}
	recordedRefusals -= sum(admitted)
	if countedAdmission != sum(busy) {
		t.Errorf("counted admission evidence over both stores = %d, want the %d RegistrarBusy answers the caller saw", countedAdmission, sum(busy))
	}
	if countedRefusal+recordedRefusals != sum(refuse) {
		t.Errorf("refusals: %d counted + %d recorded over both stores, want the %d the caller saw", countedRefusal, recordedRefusals, sum(refuse))
	}
	if bound := 4 + tokens; recordedRefusals > bound {
		t.Errorf("recorded %d refusals over two daemons, want at most burst 4 + %d refilled = %d", recordedRefusals, tokens, bound)
	}
	// The same figures from one scan of both stores. Each daemon has an
	// embedded registry of its own (the limiter is what is tested here),
	// so each answered first_mint for the one registration: compared as
	// stores of one shared registry, that is exactly one
	// duplicate_first_mint, and nothing else.
	code, out, errOut := daemons[0].run("audit", "scan", "--dir", daemons[0].auditDir, "--dir", daemons[1].auditDir, "--json")
	var both struct {
		Anomalies bool         `json:"anomalies"`
		Stores    []scanReport `json:"stores"`
		Cross     struct {
			Findings uint64            `json:"findings"`
			ByKind   map[string]uint64 `json:"by_kind"`
		} `json:"cross_store"`
	}
	if err := json.Unmarshal([]byte(out), &both); err != nil || code != auditScanAnomalies || len(both.Stores) != 2 ||
		both.Stores[0].Anomalies || both.Stores[1].Anomalies || both.Cross.Findings != 1 || both.Cross.ByKind["duplicate_first_mint"] != 1 {
		t.Fatalf("audit scan of both stores: exit %d, %v, %+v\n%s%s", code, err, both, out, errOut)
	}
	if got := both.Stores[0].Limited["admission"].Count + both.Stores[1].Limited["admission"].Count; got != sum(busy) {
		t.Errorf("audit scan --dir A --dir B: admission evidence %d, want %d", got, sum(busy))
	}
	t.Logf("elapsed %v: admitted %d (bound %d), busy %d = counted %d; refusals %d = %d recorded (bound %d) + %d counted",
		elapsed, sum(admitted), 5+tokens, sum(busy), countedAdmission, sum(refuse), recordedRefusals, 4+tokens, countedRefusal)
}
