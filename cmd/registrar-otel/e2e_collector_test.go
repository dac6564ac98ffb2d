package main

// The real-Collector test: an OpenTelemetry Collector built with the
// builder from tools/otelcol/manifest.yaml (`make otelcol`), receiving OTLP
// on loopback and writing what it receives with the file exporter; the
// daemon and `load wave` / `load flood` export to it as configured by one
// --config file.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// collectorBinary finds the test Collector: $OTELCOL_BIN, else where `make
// otelcol` puts it. Missing, the test is skipped, loudly, except in CI
// (CI set), where .ci/run builds it first and a missing binary fails.
func collectorBinary(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("OTELCOL_BIN"), filepath.Join("..", "..", "var", "tools", "otelcol", "otelcol-registrar")}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			abs, err := filepath.Abs(c)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	msg := "the test OpenTelemetry Collector is not built (run `make otelcol`, which builds var/tools/otelcol/otelcol-registrar, or set OTELCOL_BIN)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + ": in CI it must run")
	}
	t.Skip("SKIPPING THE REAL-COLLECTOR TEST: " + msg)
	return ""
}

// collectorProc is a running Collector.
type collectorProc struct {
	t   *testing.T
	url string // the OTLP/HTTP base URL
	out string // the file exporter's output
	*loggedProc
}

func startCollector(t *testing.T) *collectorProc {
	t.Helper()
	bin := collectorBinary(t)
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	dir := t.TempDir()
	port := freePort(t)
	c := &collectorProc{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port), out: filepath.Join(dir, "otlp.jsonl")}
	// The Collector's own telemetry is switched off so it binds nothing but
	// the receiver's loopback port.
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
    metrics:
      receivers: [otlp]
      exporters: [file]
`, port, c.out)
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.loggedProc, _ = startLogged(t, "collector", exec.Command(bin, "--config", cfgPath), "Everything is ready")
	return c
}

// stop sends SIGTERM: the Collector drains its pipelines and the file
// exporter flushes and closes the file before the process exits.
func (c *collectorProc) stop() {
	c.t.Helper()
	c.terminate(c.t, "collector")
}

// The OTLP/JSON the file exporter writes: one export request per line.
// Trace and span ids are hex strings in OTLP/JSON (not protojson's base64),
// so the test decodes the fields it reads itself.
type otlpLine struct {
	ResourceSpans []struct {
		Resource   otlpResource `json:"resource"`
		ScopeSpans []struct {
			Spans []otlpSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceMetrics []struct {
		Resource     otlpResource `json:"resource"`
		ScopeMetrics []struct {
			Metrics []otlpMetric `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

type otlpResource struct {
	Attributes []otlpKV `json:"attributes"`
}

type otlpKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string `json:"stringValue"`
		IntValue    *string `json:"intValue"`
	} `json:"value"`
}

func otlpAttr(kvs []otlpKV, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch {
		case kv.Value.StringValue != nil:
			return *kv.Value.StringValue, true
		case kv.Value.IntValue != nil:
			return *kv.Value.IntValue, true
		}
		return "", true
	}
	return "", false
}

type otlpSpan struct {
	TraceID      string   `json:"traceId"`
	SpanID       string   `json:"spanId"`
	ParentSpanID string   `json:"parentSpanId"`
	Name         string   `json:"name"`
	Attributes   []otlpKV `json:"attributes"`
	Events       []struct {
		Name       string   `json:"name"`
		Attributes []otlpKV `json:"attributes"`
	} `json:"events"`
	service string
}

type otlpMetric struct {
	Name string `json:"name"`
	Sum  *struct {
		DataPoints []struct {
			Attributes []otlpKV `json:"attributes"`
			AsInt      string   `json:"asInt"`
			Exemplars  []struct {
				TraceID string `json:"traceId"`
				SpanID  string `json:"spanId"`
			} `json:"exemplars"`
		} `json:"dataPoints"`
	} `json:"sum"`
	service string
}

// readCollectorOutput decodes the file exporter's output.
func readCollectorOutput(t *testing.T, path string) (spans []otlpSpan, metrics []otlpMetric) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the Collector's file exporter output: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l otlpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("file exporter line is not OTLP/JSON: %v\n%.300s", err, sc.Text())
		}
		for _, rs := range l.ResourceSpans {
			svc, _ := otlpAttr(rs.Resource.Attributes, "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.service = svc
					spans = append(spans, s)
				}
			}
		}
		for _, rm := range l.ResourceMetrics {
			svc, _ := otlpAttr(rm.Resource.Attributes, "service.name")
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					m.service = svc
					metrics = append(metrics, m)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return spans, metrics
}

var requestsLine = regexp.MustCompile(`(?m)^requests: +([0-9]+)`)
var throttledLine = regexp.MustCompile(`(?m)^throttled: +([0-9]+)`)
var traceLine = regexp.MustCompile(`(?m)^trace: +([0-9a-f]{32}) \(([a-z.]+)\)`)

func TestCollectorReceivesTheWaveAsOneTraceAndBothCountersWithExemplars(t *testing.T) {
	col := startCollector(t)
	// A small admission bucket refilling once a second, so the wave is throttled and
	// completes; a small refusal bucket that does not refill.
	d := startDaemon(t, `rate_limit_admission_burst = 6
rate_limit_admission_refill_interval_ms = 1000
rate_limit_predecision_refusal_burst = 2
rate_limit_predecision_refusal_refill_interval_ms = 3600000`, fmt.Sprintf("otlp_endpoint = %q", col.url))

	// No --socket and no --otlp-endpoint: both come from --config.
	code, out, errOut := d.run("load", "wave", "--config", d.config, "--hosts", "3", "--modules-per-host", "4",
		"--concurrency", "6", "--settle", "0")
	if code != exitOK || !strings.Contains(out, "admitted:    12") {
		t.Fatalf("load wave: exit %d\n%s%s", code, out, errOut)
	}
	waveRequests, _ := strconv.Atoi(requestsLine.FindStringSubmatch(out)[1])
	if m := throttledLine.FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Fatalf("the wave was not throttled; the test needs limited events in it:\n%s", out)
	}
	wave := traceLine.FindStringSubmatch(out)
	if wave == nil || wave[2] != "bringup.wave" {
		t.Fatalf("load wave did not print its trace:\n%s", out)
	}
	floodTraces := map[string]string{}
	for _, bucket := range []string{"predecision_refusal", "admission"} {
		code, out, errOut := d.run("load", "flood", "--config", d.config, "--bucket", bucket, "--requests", "20",
			"--concurrency", "4", "--settle", "0")
		if code != exitOK {
			t.Fatalf("load flood %s: exit %d\n%s%s", bucket, code, out, errOut)
		}
		m := traceLine.FindStringSubmatch(out)
		if m == nil || m[2] != "load.flood" {
			t.Fatalf("load flood did not print its trace:\n%s", out)
		}
		floodTraces[m[1]] = bucket
	}
	d.stop() // flushes the daemon's spans and its final metrics
	col.stop()

	spans, metrics := readCollectorOutput(t, col.out)
	byID := map[string]otlpSpan{}
	var root *otlpSpan
	roots := map[string]otlpSpan{} // trace id → the driver's root span
	for i, s := range spans {
		byID[s.SpanID] = s
		if s.service == "registrar-otel-load" && s.ParentSpanID == "" {
			roots[s.TraceID] = s
			if s.Name == "bringup.wave" {
				root = &spans[i]
			}
		}
	}
	if root == nil || root.TraceID != wave[1] {
		t.Fatalf("no bringup.wave root span with the trace %s load wave printed, among %d spans", wave[1], len(spans))
	}

	// Every daemon invocation span is the child of a driver's root span:
	// none is an orphan, and the wave's are all in the wave's trace.
	var inWave int
	limitedInWave := map[string]int{}
	limitedAll := map[string]int{}
	for _, s := range spans {
		if s.service != "registrar-otel" {
			continue
		}
		if s.Name != "registrar.mint" && s.Name != "registrar.deregister" {
			t.Errorf("daemon span %q, want only invocation spans", s.Name)
		}
		r, ok := roots[s.TraceID]
		if !ok || s.ParentSpanID != r.SpanID {
			t.Errorf("daemon span %s %s (trace %s, parent %q) is not a child of a load root span", s.Name, s.SpanID, s.TraceID, s.ParentSpanID)
			continue
		}
		for _, ev := range s.Events {
			if ev.Name != "registrar.limited" {
				continue
			}
			bucket, ok := otlpAttr(ev.Attributes, "registrar.limited_bucket")
			if !ok || (bucket != "admission" && bucket != "predecision_refusal") {
				t.Errorf("registrar.limited event on %s without a bucket: %+v", s.SpanID, ev.Attributes)
			}
			if verb, _ := otlpAttr(ev.Attributes, "registrar.verb"); verb != "mint" {
				t.Errorf("registrar.limited event verb %q, want mint", verb)
			}
			if _, ok := otlpAttr(ev.Attributes, "registrar.retry_after_s"); ok != (bucket == "admission") {
				t.Errorf("registrar.limited %s event: retry_after_s present = %v", bucket, ok)
			}
			limitedAll[bucket]++
			if s.TraceID == root.TraceID {
				limitedInWave[bucket]++
			}
		}
		if s.TraceID == root.TraceID {
			inWave++
		}
	}
	t.Logf("collector received %d spans (%d roots); %d daemon spans in the wave's trace; limited events by bucket %v (in the wave %v)",
		len(spans), len(roots), inWave, limitedAll, limitedInWave)
	if inWave != waveRequests {
		t.Errorf("%d daemon spans in the wave's trace, want one per request of the wave (%d)", inWave, waveRequests)
	}
	if limitedInWave["admission"] == 0 {
		t.Errorf("no registrar.limited admission event in the wave's trace")
	}
	if limitedAll["predecision_refusal"] == 0 || limitedAll["admission"] == 0 {
		t.Errorf("registrar.limited events by bucket %v, want both buckets", limitedAll)
	}
	for tr, bucket := range floodTraces {
		if r, ok := roots[tr]; !ok || r.Name != "load.flood" {
			t.Errorf("no load.flood root span for the %s flood's trace %s", bucket, tr)
		}
	}

	// Both per-bucket counters arrived, separately, with exemplars pointing
	// at daemon spans the Collector also received.
	for _, name := range []string{"registrar.limited.predecision_refusal", "registrar.limited.admission"} {
		var exemplars, value int
		for _, m := range metrics {
			if m.Name != name || m.service != "registrar-otel" || m.Sum == nil {
				continue
			}
			for _, dp := range m.Sum.DataPoints {
				if v, _ := otlpAttr(dp.Attributes, "verb"); v != "mint" {
					continue
				}
				n, _ := strconv.Atoi(dp.AsInt)
				value = max(value, n)
				for _, ex := range dp.Exemplars {
					s, ok := byID[ex.SpanID]
					if !ok || s.TraceID != ex.TraceID || s.service != "registrar-otel" {
						t.Errorf("%s exemplar (trace %s span %s) is not a daemon span the Collector received", name, ex.TraceID, ex.SpanID)
					}
					exemplars++
				}
			}
		}
		t.Logf("%s{verb=mint} = %d with %d exemplars", name, value, exemplars)
		if value == 0 || exemplars == 0 {
			t.Errorf("%s{verb=mint}: value %d with %d exemplars, want a count and exemplars", name, value, exemplars)
		}
	}
}

// With only a traces endpoint configured the daemon attempts no metric
// export at all: the Collector receives spans and not one metric, and the
// daemon logs no export error.
func TestCollectorTracesOnlyEndpointGetsNoMetrics(t *testing.T) {
	col := startCollector(t)
	// trace_sample_per_million = 1000000: the mint below sends no traceparent, and at
	// the 0.01 default it would leave no span to show the traces arrive.
	d := startDaemon(t, "", fmt.Sprintf("otlp_traces_endpoint = %q\ntrace_sample_per_million = 1000000", col.url+"/v1/traces"))
	flags := []string{"--socket", d.socket, "--service-name", "review", "--host", "h1", "--instance", "1", "--component", "review"}
	if code, out, errOut := d.run(append([]string{"mint"}, flags...)...); code != exitOK {
		t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
	}
	d.stop() // flushes the span; a metric exporter, if any, would push its final values now
	col.stop()
	spans, metrics := readCollectorOutput(t, col.out)
	if len(spans) != 1 || spans[0].Name != "registrar.mint" {
		t.Errorf("collector received %d spans, want the one registrar.mint", len(spans))
	}
	if len(metrics) != 0 {
		t.Errorf("collector received %d metrics from a daemon configured with a traces endpoint only", len(metrics))
	}
	if logs := d.logs.String(); strings.Contains(logs, "OpenTelemetry SDK") || !strings.Contains(logs, "metrics=off") {
		t.Errorf("daemon log: want no SDK error and metrics=off in the export line:\n%s", logs)
	}
}
