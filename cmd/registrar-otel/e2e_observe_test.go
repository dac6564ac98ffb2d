package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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

// The live-rules tests: a real Prometheus server (Debian's prometheus
// package) loads a copy of dashboards/alerts.yml in which only the `for:`
// durations are shortened (and the evaluation interval is 1 s), scrapes a
// running daemon every second, and the tests read the alerts' states and
// the dashboard's queries back from its HTTP API.

const (
	alertsFile    = "../../dashboards/alerts.yml"
	dashboardFile = "../../dashboards/registrar-limiter.json"
	// promDeadline bounds every wait on the Prometheus server (scrapes and
	// evaluations every second): an external process is polled, no
	// behaviour is timed.
	promDeadline = 90 * time.Second
	promPoll     = 200 * time.Millisecond
)

// forLine is a rule's `for:` duration in alerts.yml.
var forLine = regexp.MustCompile(`(?m)^(\s+)for: *[0-9]+[smhdwy]\s*$`)

// shortenedRules writes the shipped rules with every `for:` set to 1s and
// nothing else changed, and checks that every alert had one.
func shortenedRules(t *testing.T, dir string) (path string, alerts []string) {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+- alert: *(\S+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		alerts = append(alerts, m[1])
	}
	n := len(forLine.FindAllString(string(raw), -1))
	if n != len(alerts) || n == 0 {
		t.Fatalf("%s: %d alerts but %d for: lines; the generated copy would not shorten them all", alertsFile, len(alerts), n)
	}
	out := forLine.ReplaceAllString(string(raw), "${1}for: 1s")
	path = filepath.Join(dir, "alerts.yml")
	writeFile(t, path, []byte(out), 0o600)
	return path, alerts
}

// promServer is a running Prometheus.
type promServer struct {
	t      *testing.T
	base   string // http://127.0.0.1:port
	target string // the daemon's host:port
	alerts []string
}

// startPrometheus starts Prometheus on loopback scraping target as job
// registrar-otel with the shortened rules, and waits until it is ready.
// Missing, the test is skipped, except in CI, where .ci/run installs it.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed; .ci/run (make deps) installs Debian's prometheus package")
		}
		t.Skip("SKIPPING THE LIVE-RULES TEST: prometheus is not installed (apt-get install prometheus; make deps does)")
	}
	dir := t.TempDir()
	rules, alerts := shortenedRules(t, dir)
	base := runPrometheus(t, bin, dir, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: registrar-otel
    static_configs:
      - targets: [%q]
`, rules, target), "--enable-feature=exemplar-storage")
	p := &promServer{t: t, base: base, target: target, alerts: alerts}
	p.waitFor("Prometheus ready with the rules loaded", func() (bool, string) {
		rs, err := p.rules()
		if err != nil {
			return false, err.Error()
		}
		return len(rs) == len(alerts), fmt.Sprintf("%d rules loaded, want %d", len(rs), len(alerts))
	})
	return p
}

// runPrometheus writes config to dir/prometheus.yml and starts bin with it
// on a free port of 127.0.0.1, its TSDB under dir, plus extra flags. A
// cleanup kills it and, when the test failed, logs what it wrote. It
// returns the base URL, http://127.0.0.1:port.
func runPrometheus(t *testing.T, bin, dir, config string, flags ...string) string {
	t.Helper()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, []byte(config), 0o600)
	port := freePort(t)
	cmd := exec.Command(bin, append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
		"--log.level=warn"}, flags...)...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// waitFor polls cond until it holds or promDeadline passes.
func (p *promServer) waitFor(what string, cond func() (bool, string)) {
	p.t.Helper()
	deadline := time.Now().Add(promDeadline)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waiting for %s: gave up after %v; last state: %s", what, promDeadline, state)
		}
		time.Sleep(promPoll)
	}
}

func (p *promServer) get(path string, params url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status    string          `json:"status"`
		Error     string          `json:"error"`
		ErrorType string          `json:"errorType"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// promRule is an alerting rule's state from /api/v1/rules.
type promRule struct {
	Name           string    `json:"name"`
	State          string    `json:"state"` // inactive, pending, firing
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
	Alerts         []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	} `json:"alerts"`
}

func (p *promServer) rules() ([]promRule, error) {
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// sample is one series of an instant query.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s sample) float() float64 {
	str, _ := s.Value[1].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

func (p *promServer) query(q string) ([]sample, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []sample `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	return data.Result, nil
}

// scraped waits until q (one series) is at least min.
func (p *promServer) scraped(q string, min float64) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%s ≥ %v", q, min), func() (bool, string) {
		s, err := p.query(q)
		if err != nil || len(s) != 1 {
			return false, fmt.Sprintf("%v, err %v", s, err)
		}
		return s[0].float() >= min, fmt.Sprintf("%v", s[0].float())
	})
}

// settled waits until every rule has been evaluated at least twice since
// now (a `for: 1s` alert whose condition held would be firing by then) and
// returns the rules.
func (p *promServer) settled() []promRule {
	p.t.Helper()
	since := time.Now().Add(2*time.Second + 100*time.Millisecond)
	var rs []promRule
	p.waitFor("two rule evaluations", func() (bool, string) {
		var err error
		rs, err = p.rules()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.LastEvaluation.Before(since) {
				return false, fmt.Sprintf("%s last evaluated %v", r.Name, r.LastEvaluation)
			}
		}
		return true, ""
	})
	for _, r := range rs {
		if r.Health != "ok" || r.LastError != "" {
			p.t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
		}
	}
	return rs
}

// states maps each alert to its state.
func states(rs []promRule) map[string]string {
	m := map[string]string{}
	for _, r := range rs {
		m[r.Name] = r.State
	}
	return m
}

// waitFiring waits until alert fires and returns its alerts' labels.
func (p *promServer) waitFiring(alert string) []map[string]string {
	p.t.Helper()
	var labels []map[string]string
	p.waitFor(alert+" firing", func() (bool, string) {
		rs, err := p.rules()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Name == alert && r.State == "firing" {
				for _, a := range r.Alerts {
					labels = append(labels, a.Labels)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v", states(rs))
	})
	return labels
}

// TestLiveRulesFloodsFireTheirAlertsAndStoppingFiresRegistrarDown: a
// refusal flood fires RegistrarPredecisionRefusalFlood and not the
// admission alert; an admission flood fires RegistrarAdmissionThrottleSpike;
// every dashboard panel's query returns data without NaN; stopping the
// daemon fires RegistrarDown.
func TestLiveRulesFloodsFireTheirAlertsAndStoppingFiresRegistrarDown(t *testing.T) {
	d := prepareDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000`, "", "")
	// A sealed store, so the seal panels' queries have series to answer
	// (and RegistrarAuditSealStalled is evaluated on a store that seals).
	if code, out, errOut := d.run("audit", "seal", "init", "--config", d.config); code != exitOK {
		t.Fatalf("audit seal init: exit %d\n%s%s", code, out, errOut)
	}
	d.serve()
	target := strings.TrimSuffix(strings.TrimPrefix(d.metricsURL, "http://"), "/metrics")
	p := startPrometheus(t, target)
	p.scraped(`up{job="registrar-otel"}`, 1)
	if st := states(p.settled()); slices.ContainsFunc(p.alerts, func(a string) bool { return st[a] != "inactive" }) {
		t.Fatalf("alerts before any traffic: %v, want all inactive", st)
	}

	// 1. A refusal flood: 200 malformed mints, the burst of 32 recorded,
	//    the rest limited.
	if code, out, errOut := d.run("load", "flood", "--config", d.config, "--bucket", "predecision_refusal", "--requests", "200", "--settle", "0"); code != exitOK {
		t.Fatalf("load flood predecision_refusal: exit %d\n%s%s", code, out, errOut)
	}
	p.waitFiring("RegistrarPredecisionRefusalFlood")
	st := states(p.settled())
	for _, a := range p.alerts {
		if want := map[bool]string{true: "firing", false: "inactive"}[a == "RegistrarPredecisionRefusalFlood"]; st[a] != want {
			t.Errorf("after the refusal flood %s is %s, want %s", a, st[a], want)
		}
	}

	// 2. Admitted traffic spread over several scrapes (rate() needs two
	//    samples of a series), first mints only, while deregister has no
	//    traffic at all: every panel has data and none shows NaN for the
	//    idle verb (the throttle ratio's 0/0).
	for i := range 2 {
		mint := []string{"mint", "--socket", d.socket, "--service-name", "review", "--host", fmt.Sprintf("spread-h%d", i), "--instance", "1", "--component", "review"}
		if code, out, errOut := d.run(mint...); code != exitOK {
			t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
		}
		p.scraped(`sum(registrar_invocations_total{job="registrar-otel",verb="mint",result="first_mint"})`, float64(i+1))
	}
	checkDashboardQueries(t, p)

	// 3. The same for deregister, then an admission flood: 200 remints of
	//    one registration, the rest of the burst admitted, the others
	//    throttled.
	for i := range 2 {
		dereg := []string{"deregister", "--socket", d.socket, "--service-name", "review", "--host", fmt.Sprintf("spread-h%d", i), "--instance", "1", "--component", "review"}
		if code, out, errOut := d.run(dereg...); code != exitOK {
			t.Fatalf("deregister: exit %d\n%s%s", code, out, errOut)
		}
		p.scraped(`sum(registrar_invocations_total{job="registrar-otel",verb="deregister",result="identity_removed"})`, float64(i+1))
	}
	code, out, errOut := d.run("load", "flood", "--config", d.config, "--bucket", "admission", "--requests", "200", "--settle", "0")
	if code != exitOK {
		t.Fatalf("load flood admission: exit %d\n%s%s", code, out, errOut)
	}
	labels := p.waitFiring("RegistrarAdmissionThrottleSpike")
	if len(labels) != 1 || labels[0]["verb"] != "mint" || labels[0]["instance"] != target || labels[0]["severity"] != "critical" {
		t.Errorf("RegistrarAdmissionThrottleSpike alerts %v, want one for verb mint on %s", labels, target)
	}
	checkDashboardQueries(t, p)

	// The throttle panel's exemplars: Prometheus stored the flood's trace
	// id on the limited counter, which is what the panel's dots link to.
	flood := traceLine.FindStringSubmatch(out)
	if flood == nil {
		t.Fatalf("load flood printed no trace:\n%s", out)
	}
	if ids := p.exemplarTraceIDs(`registrar_limited_admission_total{job="registrar-otel"}`); !slices.Contains(ids, flood[1]) {
		t.Errorf("exemplars of registrar_limited_admission_total carry traces %v, want the flood's %s", ids, flood[1])
	}

	// 4. The daemon stops: RegistrarDown fires for its instance.
	d.stop()
	labels = p.waitFiring("RegistrarDown")
	if len(labels) != 1 || labels[0]["instance"] != target {
		t.Errorf("RegistrarDown alerts %v, want one for %s", labels, target)
	}
}

// TestLiveRulesA512MintWaveLeavesEveryAlertInactive: the reference
// bring-up wave fits the default burst and pages nobody.
func TestLiveRulesA512MintWaveLeavesEveryAlertInactive(t *testing.T) {
	d := startDaemon(t, "", "")
	target := strings.TrimSuffix(strings.TrimPrefix(d.metricsURL, "http://"), "/metrics")
	p := startPrometheus(t, target)
	code, out, errOut := d.run("load", "wave", "--config", d.config, "--hosts", "64", "--modules-per-host", "8",
		"--concurrency", "16", "--settle", "0")
	if code != exitOK || !strings.Contains(out, "admitted:    512") || !strings.Contains(out, "throttled:   0") {
		t.Fatalf("load wave: exit %d\n%s%s", code, out, errOut)
	}
	p.scraped(`sum(registrar_invocations_total{job="registrar-otel",result="first_mint"})`, 512)
	st := states(p.settled())
	for _, a := range p.alerts {
		if st[a] != "inactive" {
			t.Errorf("after a 512-mint wave %s is %q, want inactive", a, st[a])
		}
	}
	if s, err := p.query(`ALERTS`); err != nil || len(s) != 0 {
		t.Errorf("ALERTS after the wave: %v (err %v), want none", s, err)
	}
}

// exemplarTraceIDs returns the trace ids of the exemplars Prometheus
// stored for q over the last ten minutes.
func (p *promServer) exemplarTraceIDs(q string) []string {
	p.t.Helper()
	var data []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	now := time.Now()
	err := p.get("/api/v1/query_exemplars", url.Values{"query": {q},
		"start": {strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)}, "end": {strconv.FormatInt(now.Unix()+1, 10)}}, &data)
	if err != nil {
		p.t.Fatalf("query_exemplars %s: %v", q, err)
	}
	var ids []string
	for _, series := range data {
		for _, e := range series.Exemplars {
			ids = append(ids, e.Labels["trace_id"])
		}
	}
	return ids
}

// backendRow is the dashboard row of the openbao backend's panels.
const backendRow = "OpenBao backend"

// checkDashboardQueries runs every panel target of the dashboard against
// the live Prometheus, with the variables set as Grafana would ($job the
// scrape job, $instance the daemon, $__rate_interval five minutes): each
// returns at least one series and no NaN or infinite value. The panels of
// the OpenBao backend row are left out: the daemon runs the embedded
// backend. So is a panel of the shadow counter while the daemon exports
// no shadow series: its series exist only for a caller policy with a
// shadow table, which this daemon's configuration may not have (with one,
// the panel is checked like the others).
func checkDashboardQueries(t *testing.T, p *promServer) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	// Inside a PromQL string a regex escape is itself escaped, as Grafana
	// does for a regex-matched variable.
	inst := strings.ReplaceAll(regexp.QuoteMeta(p.target), `\`, `\\`)
	vars := strings.NewReplacer(
		"$__rate_interval", "5m", "$__interval", "15s", "$__range", "1h",
		"$job", "registrar-otel", "$instance", inst,
		"${job}", "registrar-otel", "${instance}", inst)
	var all []panel
	for _, pn := range dash.Panels {
		all = append(all, pn)
		all = append(all, pn.Panels...)
	}
	shadow, err := p.query(`registrar_shadow_limited_total{job="registrar-otel"}`)
	if err != nil {
		t.Fatal(err)
	}
	ceilings, err := p.query(`registrar_registrations_ceiling{job="registrar-otel"}`)
	if err != nil {
		t.Fatal(err)
	}
	n, row := 0, ""
	for _, pn := range all {
		if pn.Type == "row" {
			row = pn.Title
		}
		if row == backendRow {
			// This daemon runs the embedded backend: the openbao series
			// do not exist (the dashboards package's golden-name test
			// checks those queries' names).
			continue
		}
		for _, tg := range pn.Targets {
			if len(shadow) == 0 && strings.Contains(tg.Expr, "registrar_shadow_limited_total") {
				t.Logf("panel %q target %s not checked: the daemon has no caller policy with a shadow table", pn.Title, tg.RefID)
				continue
			}
			if len(ceilings) == 0 && strings.Contains(tg.Expr, "registrar_registrations_ceiling") {
				t.Logf("panel %q target %s not checked: the daemon has no component with max_instances_per_host", pn.Title, tg.RefID)
				continue
			}
			n++
			q := vars.Replace(tg.Expr)
			res, err := p.query(q)
			switch {
			case err != nil:
				t.Errorf("panel %q target %s: %v\n%s", pn.Title, tg.RefID, err, q)
			case len(res) == 0:
				t.Errorf("panel %q target %s returns no data:\n%s", pn.Title, tg.RefID, q)
			}
			for _, s := range res {
				if v := s.float(); math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("panel %q target %s: %v for %v:\n%s", pn.Title, tg.RefID, s.Value[1], s.Metric, q)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no panel targets")
	}
	t.Logf("%d dashboard queries returned data", n)
}

// The real-Collector test: an OpenTelemetry Collector built with the
// builder from tools/otelcol/manifest.yaml (`make otelcol`), receiving OTLP
// on loopback and writing what it receives with the file exporter; the
// daemon and `load wave` / `load flood` export to it as configured by one
// --config file.

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
	writeFile(t, cfgPath, []byte(cfg), 0o600)
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

// The stamped build and the daemon's own logs, tried as an operator would:
// `make build` stamps git describe into the binary, and what the daemon
// says about itself (registrar_build_info, service.version, the version
// command) agrees with it; a --log-format json daemon whose collector is
// down still writes only JSON lines.

// servedDaemon is a `serve` started by launchServe.
type servedDaemon struct {
	*loggedProc
	metricsURL string
	socket     string
}

var jsonMetricsRE = regexp.MustCompile(`"metrics":"(http://[^"]+/metrics)"`)

// launchServe starts bin serve with a fresh configuration (telemetry
// lines added to [telemetry]), extra serve flags and extra environment,
// and returns once it logs that it serves.
func launchServe(t *testing.T, bin, telemetryExtra string, env []string, args ...string) *servedDaemon {
	t.Helper()
	dir := shortTempDir(t)
	s := &servedDaemon{}
	s.socket, _, _ = daemonPaths(dir)
	cfgPath := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "127.0.0.1:0"
`+telemetryExtra+"\n"), 0o600)
	cmd := exec.Command(bin, append([]string{"serve", "--config", cfgPath}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var line string
	s.loggedProc, line = startLogged(t, "daemon", cmd, "registrar-otel serving")
	if m := metricsRE.FindStringSubmatch(line); m != nil {
		s.metricsURL = m[1]
	} else if m := jsonMetricsRE.FindStringSubmatch(line); m != nil {
		s.metricsURL = m[1]
	}
	return s
}

func (s *servedDaemon) stop(t *testing.T) {
	t.Helper()
	s.terminate(t, "daemon")
}

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git %v: %v", args, err)
		}
		t.Skipf("git %v: %v (not a git checkout?)", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestBuildInfoAgreesWithTheVersionFileOfAStampedBuild builds with `make
// build`, as a release is built, and asks the running daemon: the version
// is the VERSION file, the revision git's HEAD.
func TestBuildInfoAgreesWithTheVersionFileOfAStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	versionFile, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	describe := strings.TrimSpace(string(versionFile))
	revision := gitOutput(t, root, "rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "registrar-otel")
	mk := exec.Command("make", "-C", root, "build", "BIN="+bin)
	// The Makefile's own stamping, not a VERSION or REVISION a release
	// pipeline might export.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERSION=") && !strings.HasPrefix(kv, "REVISION=") {
			mk.Env = append(mk.Env, kv)
		}
	}
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}

	t.Run("registrar_build_info and service.version", func(t *testing.T) {
		s := launchServe(t, bin, "", nil)
		body := getBody(t, http.DefaultClient, s.metricsURL)
		want := fmt.Sprintf(`registrar_build_info{goversion=%q,revision=%q,version=%q} 1`, runtime.Version(), revision, describe)
		if !strings.Contains(body, want) {
			t.Errorf("/metrics does not carry\n  %s\n%s", want, grep(body, "registrar_build_info"))
		}
		if want := fmt.Sprintf(`service_version=%q`, describe); !strings.Contains(grep(body, "target_info"), want) {
			t.Errorf("target_info does not carry %s:\n%s", want, grep(body, "target_info"))
		}
		if !strings.Contains(body, "\nprocess_cpu_seconds_total ") || !strings.Contains(body, "\ngo_goroutines ") {
			t.Errorf("/metrics lacks the process_* and go_* series")
		}
		s.stop(t)
	})

	t.Run("version command", func(t *testing.T) {
		code, out, errOut := runCmd(t, exec.Command(bin, "version"))
		if strings.Contains(errOut, "unknown command") {
			t.Skip("this build has no version command yet (issue 15 adds it)")
		}
		if code != exitOK || !strings.Contains(out, describe) {
			t.Errorf("registrar-otel version: exit %d\nstdout: %s\nstderr: %s\nwant it to print %q", code, out, errOut, describe)
		}
	})
}

// TestPlainGoBuildReportsTheModuleVersionAndRevision: a plain `go build`
// (no -ldflags) prints what the toolchain recorded, not "dev"/"unknown":
// the main module's version and the checkout's HEAD.
func TestPlainGoBuildReportsTheModuleVersionAndRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short mode")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	revision := gitOutput(t, root, "rev-parse", "HEAD")
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// The go command records VCS information only when the checkout's
		// .git is a directory: a `git worktree` (a .git file) gets none.
		t.Skipf("%s/.git is not a directory (a git worktree?): the go command records no VCS information there", root)
	}
	bin := filepath.Join(t.TempDir(), "registrar-otel")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/registrar-otel")
	build.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			build.Env = append(build.Env, kv)
		}
	}
	build.Env = append(build.Env, "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mod, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var modVersion string
	for _, l := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "mod" {
			modVersion = f[2]
		}
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var v versionJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if modVersion == "" || v.Version != modVersion {
		t.Errorf("version = %q, want the module version the toolchain recorded, %q", v.Version, modVersion)
	}
	if !strings.HasPrefix(v.Revision, revision) {
		t.Errorf("revision = %q, want git's HEAD %s (with \" (modified)\" for a dirty tree)", v.Revision, revision)
	}
}

func grep(body, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestJSONLogStaysJSONWithTheCollectorDown: a --log-format json daemon
// exporting to a closed OTLP port logs the SDK's export failures through
// slog, rate-limited, and nothing but JSON lines.
func TestJSONLogStaysJSONWithTheCollectorDown(t *testing.T) {
	bin := buildBinary(t)
	closed := "http://" + closedAddr(t)
	// The standard variables make the SDK export (and fail) every 100 ms.
	// trace_sample_per_million = 1000000: the mints below send no traceparent, and
	// their spans must be exported (and fail) too.
	s := launchServe(t, bin, fmt.Sprintf("otlp_endpoint = %q\ntrace_sample_per_million = 1000000", closed), []string{
		"OTEL_METRIC_EXPORT_INTERVAL=100", "OTEL_METRIC_EXPORT_TIMEOUT=200",
		"OTEL_EXPORTER_OTLP_TIMEOUT=200", "OTEL_BSP_SCHEDULE_DELAY=100",
	}, "--log-format", "json")
	// A few invocations, so there are spans to export too.
	for i := range 3 {
		code, out, errOut := (&daemonProc{t: t, bin: bin}).run("mint", "--socket", s.socket, "--service-name", "review",
			"--host", fmt.Sprintf("h%d", i), "--instance", "1", "--component", "review")
		if code != exitOK {
			t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
		}
	}
	// Wait (on the daemon's own log) for both signals' failures.
	if !poll(60*time.Second, func() bool {
		return strings.Contains(s.logs.String(), "/v1/metrics") && strings.Contains(s.logs.String(), "traces export")
	}) {
		t.Fatalf("no OTLP export failure logged within 60 s:\n%s", s.logs.String())
	}
	s.stop(t)
	sdkLines := 0
	for i, line := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %d is not JSON: %q", i+1, line)
			continue
		}
		if msg, _ := m["msg"].(string); strings.Contains(msg, "OpenTelemetry SDK") {
			sdkLines++
		}
	}
	// Export failed about every 100 ms per signal; rate-limited, each kind
	// of failure is logged once a minute.
	if sdkLines == 0 || sdkLines > 6 {
		t.Errorf("%d OpenTelemetry SDK lines, want a few (rate-limited):\n%s", sdkLines, s.logs.String())
	}
}
