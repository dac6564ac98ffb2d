package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/otlptest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// TestPrometheusScrapesTheDaemonDuringAFlood runs a real Prometheus server
// (Debian's prometheus package; .ci/run installs it) against a running
// daemon, floods both buckets, and asks Prometheus for the two limited
// counters.
func TestPrometheusScrapesTheDaemonDuringAFlood(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (apt-get install prometheus; .ci/run does): skipping the real-scrape test")
	}
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = 3
rate_limit_predecision_refusal_refill_interval_ms = 3600000`, "")
	if d.metricsURL == "" {
		t.Fatalf("daemon did not log its metrics address:\n%s", d.logs.String())
	}
	target := strings.TrimSuffix(strings.TrimPrefix(d.metricsURL, "http://"), "/metrics")

	base := runPrometheus(t, prom, t.TempDir(), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: registrar-otel
    static_configs:
      - targets: [%q]
`, target))

	// The flood: 20 well-formed mints (5 admitted, 15 throttled) and 10
	// malformed ones (3 recorded, 7 limited), from one identity.
	client := wire.NewUnixClient(d.socket)
	good := wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60}
	bad := good
	bad.ServiceName = "BAD"
	for i := range 30 {
		req := good
		if i%3 == 2 {
			req = bad
		}
		if _, err := client.Mint(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}

	api := base + "/api/v1/query"
	want := map[string]float64{
		`sum(registrar_limited_admission_total{job="registrar-otel"})`:           15,
		`sum(registrar_limited_predecision_refusal_total{job="registrar-otel"})`: 7,
	}
	// Prometheus scrapes every second; give it a bounded time to see the
	// flood (this waits on an external server, it does not time behaviour).
	deadline := time.Now().Add(60 * time.Second)
	for query, value := range want {
		for {
			got, err := promQuery(api, query)
			if err == nil && got == value {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus answers %s = %v (err %v), want %v", query, got, err, value)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// And the two buckets stay two series per verb, never a sum.
	if n, err := promCount(api, `registrar_limited_admission_total{job="registrar-otel"}`); err != nil || n != 2 {
		t.Fatalf("registrar_limited_admission_total has %d series (err %v), want one per verb", n, err)
	}
	d.stop()
}

type promResponse struct {
	Status string `json:"status"`
	Data   struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func promGet(api, query string) (*promResponse, error) {
	resp, err := http.Get(api + "?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var pr promResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return nil, err
	}
	if pr.Status != "success" {
		return nil, fmt.Errorf("status %q", pr.Status)
	}
	return &pr, nil
}

func promQuery(api, query string) (float64, error) {
	pr, err := promGet(api, query)
	if err != nil {
		return 0, err
	}
	if len(pr.Data.Result) != 1 {
		return 0, fmt.Errorf("%d results", len(pr.Data.Result))
	}
	s, ok := pr.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v", pr.Data.Result[0].Value)
	}
	return strconv.ParseFloat(s, 64)
}

func promCount(api, query string) (int, error) {
	pr, err := promGet(api, query)
	if err != nil {
		return 0, err
	}
	return len(pr.Data.Result), nil
}

// TestWaveTraceReachesOTLPAsOneTrace runs `load wave` against a daemon, both
// exporting over OTLP/HTTP to a test receiver decoding the real protobuf:
// the wave is one trace, the bringup.wave root span with every mint's
// server span as its child.
func TestWaveTraceReachesOTLPAsOneTrace(t *testing.T) {
	rcv := otlptest.Start()
	t.Cleanup(rcv.Close)
	d := startDaemon(t, "", fmt.Sprintf("otlp_endpoint = %q", rcv.URL))
	code, out, errOut := d.run("load", "wave", "--socket", d.socket, "--audit-dir", d.auditDir,
		"--hosts", "4", "--modules-per-host", "3", "--concurrency", "4", "--otlp-endpoint", rcv.URL, "--settle", "0")
	if code != exitOK || !strings.Contains(out, "admitted:    12") || !strings.Contains(out, "throttled:   0") {
		t.Fatalf("load wave: exit %d\n%s%s", code, out, errOut)
	}
	d.stop() // flushes the daemon's spans

	for _, err := range rcv.Errors() {
		t.Errorf("receiver: %v", err)
	}
	var root *otlptest.Span
	var mints []otlptest.Span
	for _, s := range rcv.Spans() {
		switch s.GetName() {
		case "bringup.wave":
			root = &s
		case "registrar.mint":
			mints = append(mints, s)
		}
	}
	if root == nil || root.Service != "registrar-otel-load" {
		t.Fatalf("no bringup.wave root span from registrar-otel-load among %d spans", len(rcv.Spans()))
	}
	if len(mints) != 12 {
		t.Fatalf("%d registrar.mint spans, want 12", len(mints))
	}
	for _, m := range mints {
		if string(m.GetTraceId()) != string(root.GetTraceId()) || string(m.GetParentSpanId()) != string(root.GetSpanId()) || m.Service != "registrar-otel" {
			t.Fatalf("mint span %x (service %s) has trace %x parent %x; want the root's trace %x and span %x",
				m.GetSpanId(), m.Service, m.GetTraceId(), m.GetParentSpanId(), root.GetTraceId(), root.GetSpanId())
		}
	}
	if !strings.Contains(out, fmt.Sprintf("trace:       %x", root.GetTraceId())) {
		t.Fatalf("load summary does not name the trace %x:\n%s", root.GetTraceId(), out)
	}
}
