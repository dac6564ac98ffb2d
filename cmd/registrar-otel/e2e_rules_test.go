package main

// The live-rules tests: a real Prometheus server (Debian's prometheus
// package) loads a copy of dashboards/alerts.yml in which only the `for:`
// durations are shortened (and the evaluation interval is 1 s), scrapes a
// running daemon every second, and the tests read the alerts' states and
// the dashboard's queries back from its HTTP API.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
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
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000`, "")
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
// backend.
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
