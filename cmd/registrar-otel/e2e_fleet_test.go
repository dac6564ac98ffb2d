package main

// Fleet-scale end-to-end tests: a thousand mTLS identities flooding every
// bucket, and a crash in the middle of a bring-up wave.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/wire"
)

// auditLine is the part of an audit record the fleet tests read.
type auditLine struct {
	Phase          string `json:"phase"`
	RequestID      string `json:"request_id"`
	Verb           string `json:"verb"`
	CallerIdentity string `json:"caller_identity"`
	RegistrationID string `json:"registration_id"`
	LimitedBucket  string `json:"limited_bucket"`
	Count          uint64 `json:"count"`
	WindowStart    string `json:"window_start"`
	WindowEnd      string `json:"window_end"`
	Outcome        *struct {
		Class  string `json:"class"`
		Reason string `json:"reason"`
	} `json:"outcome"`
}

// readAudit parses every record of every file in the audit directory.
func readAudit(t *testing.T, dir string) []auditLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("audit files in %s: %v %v", dir, files, err)
	}
	var out []auditLine
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l auditLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v: %q", f, err, sc.Text())
			}
			out = append(out, l)
		}
		fh.Close()
	}
	return out
}

// promCounter sums every sample of a counter in a /metrics exposition.
func promCounter(t *testing.T, exposition, name string) uint64 {
	t.Helper()
	var sum uint64
	found := false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		sum += uint64(v)
		found = true
	}
	if !found {
		t.Fatalf("%s not in the exposition", name)
	}
	return sum
}

func getMetrics(t *testing.T, u string) string {
	t.Helper()
	return getBody(t, http.DefaultClient, u)
}

// TestAThousandMTLSIdentitiesFloodingEveryBucketAreCountedExactly: 1,000
// client certificates, each flooding both buckets of both verbs past their
// bursts over mutual TLS on loopback, then SIGTERM. Every identity keeps at
// most one window per key (≤ 4 counted records each: 4,000 keys fit the
// window cap, so no window is flushed early), and the limited invocations
// agree exactly across the counted records, registrar_health, the
// Prometheus counters and what the clients saw.
func TestAThousandMTLSIdentitiesFloodingEveryBucketAreCountedExactly(t *testing.T) {
	buildBinary(t)
	const identities, perBucket, burst = 1000, 1, 2
	pki := newE2EPKI(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(t, pki.tlsLines(addr)+fmt.Sprintf(`maintenance_interval_ms = 50
rate_limit_admission_burst = %d
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = %d
rate_limit_predecision_refusal_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, burst, burst), "")
	if d.metricsURL == "" {
		t.Fatal("no metrics URL in the serving line")
	}

	certs := make([]tls.Certificate, identities)
	for i := range certs {
		certs[i] = pki.Client(t, fmt.Sprintf("spiffe://fleet.test/host-%04d", i))
	}
	var (
		busy, refused, admitted atomic.Uint64
		failures                atomic.Uint64
		next                    atomic.Int64
	)
	ctx := context.Background()
	// One client (one identity) per certificate. The requests go
	// round-robin over the identities, so between two events of one key
	// come thousands of other keys' events: a window cap smaller than the
	// fleet would flush each window after one event. Each call has a
	// connection of its own (a thousand idle keep-alive connections would
	// hold the server's 64 connection slots).
	clients := make([]*wire.Client, identities)
	roots := pki.Pool()
	for i := range clients {
		clients[i] = wire.NewTLSClient(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{certs[i]}}, wire.WithoutKeepAlive())
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	call := func(i, kind int) (*wire.Response, error) {
		host := fmt.Sprintf("h%04d", i)
		svc := "review"
		if kind%2 == 1 {
			svc = "Not-A-Label!" // the pre-derivation arm
		}
		if kind < 2 {
			return clients[i].Mint(ctx, wire.MintRequest{ProtocolVersion: 1, ServiceName: svc, Host: host, Instance: 1, Component: "review",
				Spec: wire.Spec{Component: "review", ServiceName: svc}, WrapTTL: 60})
		}
		return clients[i].Deregister(ctx, wire.DeregisterRequest{ProtocolVersion: 1, ServiceName: svc, Host: host, Instance: 1, Component: "review"})
	}
	const perIdentity = 4 * (burst + perBucket)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= identities*perIdentity {
					return
				}
				// n = (round × 4 + kind) × identities + i
				i, kind := n%identities, n/identities%4
				resp, err := call(i, kind)
				switch {
				case err != nil:
					failures.Add(1)
					t.Errorf("identity %d: %v", i, err)
				case resp.OK():
					admitted.Add(1)
				case resp.ErrorID == wire.RegistrarBusy:
					busy.Add(1)
				case resp.ErrorID == wire.ServiceLabelInvalid:
					refused.Add(1)
				default:
					failures.Add(1)
					t.Errorf("identity %d: unexpected answer %d %s %s", i, resp.StatusCode, resp.ErrorID, resp.Detail)
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() > 0 {
		t.FailNow()
	}
	total := uint64(identities * perIdentity)
	if got := busy.Load() + refused.Load() + admitted.Load(); got != total {
		t.Fatalf("%d answers, want %d", got, total)
	}

	// registrar_health is refreshed on the tick (every 50 ms here): wait,
	// bounded, until a snapshot taken after the last answer is served (the
	// admission count matches, and three reads in a row agree).
	hc := wire.NewUnixClient(d.socket)
	var h *wire.Response
	deadline := time.Now().Add(30 * time.Second)
	for same := 0; same < 3; {
		prev := h
		var err error
		if h, err = hc.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if prev != nil && h.Health.Limiter == prev.Health.Limiter && h.Health.Limiter.LimitedAdmission == busy.Load() {
			same++
		} else {
			same = 0
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(60 * time.Millisecond) // one tick of the daemon under test
	}
	metrics := getMetrics(t, d.metricsURL)
	d.stop()

	recs := readAudit(t, d.auditDir)
	var counted [2]uint64 // predecision_refusal, admission
	var recordedRefusals uint64
	recsOf := map[string]int{}
	keys := map[string]bool{}
	for _, r := range recs {
		switch r.Phase {
		case "limited":
			recsOf[r.CallerIdentity]++
			k := r.CallerIdentity + "|" + r.Verb + "|" + r.LimitedBucket
			if keys[k] {
				t.Fatalf("two counted records for %s in one window", k)
			}
			keys[k] = true
			switch r.LimitedBucket {
			case "predecision_refusal":
				counted[0] += r.Count
			case "admission":
				counted[1] += r.Count
			default:
				t.Fatalf("counted record with bucket %q", r.LimitedBucket)
			}
		case "outcome":
			if r.Outcome != nil && r.Outcome.Class == "refused" && r.Outcome.Reason == "invalid_service_name" {
				recordedRefusals++
			}
		}
	}
	if len(recsOf) != identities {
		t.Fatalf("counted records for %d identities, want %d", len(recsOf), identities)
	}
	for id, n := range recsOf {
		if n > 4 {
			t.Fatalf("%s has %d counted records in one window, want at most 4", id, n)
		}
	}
	limitedRefusals := refused.Load() - recordedRefusals // the clients' refusals whose records were suppressed
	for _, c := range []struct {
		name                                 string
		records, health, prom, clients, want uint64
	}{
		{"predecision_refusal", counted[0], h.Health.Limiter.LimitedPredecisionRefusal,
			promCounter(t, metrics, "registrar_limited_predecision_refusal_total"), limitedRefusals, 0},
		{"admission", counted[1], h.Health.Limiter.LimitedAdmission,
			promCounter(t, metrics, "registrar_limited_admission_total"), busy.Load(), 0},
	} {
		if c.records != c.health || c.health != c.prom || c.prom != c.clients || c.clients == 0 {
			t.Errorf("%s: counted records %d, registrar_health %d, Prometheus %d, clients %d: want all equal and non-zero",
				c.name, c.records, c.health, c.prom, c.clients)
		}
	}
	t.Logf("%d identities, %d answers: %d admitted, %d busy, %d refused (%d recorded); %d counted records",
		identities, total, admitted.Load(), busy.Load(), refused.Load(), recordedRefusals, len(keys))
	if code, rep := d.scan(); code != 0 || rep.Anomalies {
		t.Fatalf("audit scan: exit %d, %+v", code, rep)
	}
}

// TestKill9MidWaveLosesNoAnsweredMint kills the daemon with SIGKILL in the
// middle of a bring-up wave minted 64 at a time over the unix socket.
// Every mint the client saw answered is in the registry and has its intent
// and its first_mint outcome in the store; the scan's
// intent_without_outcome counts exactly the intents with no outcome, each
// one a mint that was still in flight (never answered), at most 64.
func TestKill9MidWaveLosesNoAnsweredMint(t *testing.T) {
	const concurrency, killAfter = 64, 400
	d := startDaemon(t, "rate_limit_admission_burst = 100000", "")
	client := wire.NewUnixClient(d.socket)
	type answered struct{ requestID, registrationID string }
	var (
		mu     sync.Mutex
		seen   []answered
		killed bool
		next   atomic.Int64
	)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				n := next.Add(1)
				host := fmt.Sprintf("wave-h%05d", n)
				resp, err := client.Mint(ctx, wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: host, Instance: 1,
					Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60})
				if err != nil {
					return // the daemon is gone
				}
				if !resp.OK() {
					t.Errorf("mint %s: %d %s %s", host, resp.StatusCode, resp.ErrorID, resp.Detail)
					return
				}
				mu.Lock()
				seen = append(seen, answered{resp.RequestID, resp.RegistrationID})
				if len(seen) >= killAfter && !killed {
					killed = true
					d.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not die")
	}
	if !killed {
		t.Fatal("the wave ended before the kill")
	}

	// The registry: every answered mint is bound.
	b, err := embedded.Open(filepath.Join(d.dir, "lib"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, a := range seen {
		if _, ok, err := b.Binding(a.registrationID); err != nil || !ok {
			t.Fatalf("answered mint %s (%s) is not in the registry: %v", a.registrationID, a.requestID, err)
		}
	}
	// The store: both records of every answered mint.
	intents, outcomes := map[string]bool{}, map[string]string{}
	for _, r := range readAudit(t, d.auditDir) {
		switch r.Phase {
		case "intent":
			intents[r.RequestID] = true
		case "outcome":
			if r.Outcome != nil {
				outcomes[r.RequestID] = r.Outcome.Class
			}
		}
	}
	answeredIDs := map[string]bool{}
	for _, a := range seen {
		answeredIDs[a.requestID] = true
		if !intents[a.requestID] || outcomes[a.requestID] != "first_mint" {
			t.Fatalf("answered mint %s: intent %v, outcome %q; want both records", a.requestID, intents[a.requestID], outcomes[a.requestID])
		}
	}
	var inFlight []string
	for id := range intents {
		if _, ok := outcomes[id]; !ok {
			inFlight = append(inFlight, id)
		}
	}
	// The scan, as of after its settle grace.
	rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: d.auditDir, Now: time.Now().Add(2 * audit.DefaultScanGrace)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MalformedRecords != 0 || rep.IntentWithoutOutcome != uint64(len(inFlight)) || len(inFlight) > concurrency {
		t.Fatalf("scan: %d malformed, %d intent_without_outcome; %d intents have no outcome (at most %d in flight)",
			rep.MalformedRecords, rep.IntentWithoutOutcome, len(inFlight), concurrency)
	}
	for _, u := range rep.Unpaired {
		if answeredIDs[u.RequestID] {
			t.Fatalf("answered mint %s reported as intent_without_outcome", u.RequestID)
		}
	}
	t.Logf("%d mints answered before SIGKILL, %d in flight", len(seen), len(inFlight))
}
