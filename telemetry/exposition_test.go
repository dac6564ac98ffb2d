package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const goldenNames = "testdata/metrics_names.golden"

// fakeBackend creates every binding and removes every binding it is asked
// to: the exposition test needs the verbs' results, not a registry.
type fakeBackend struct{}

func (fakeBackend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	return registrar.MintCreated, registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: op.Now.Add(op.WrapTTL)}, nil
}

func (fakeBackend) Deregister(context.Context, registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	return registrar.DeregisterRemoved, nil
}

// identity is the caller identity fed through the whole chain; it must not
// appear anywhere in the exposition.
const identity = "spiffe://tenant-7.example/ns/bringup/sa/secret-caller"

// exercised is a Telemetry with every instrument registered and driven the
// way the daemon drives them: real verbs over a real limiter, sink chain
// and audit store, with fake limiter and coalescer stats.
type exercised struct {
	tel        *telemetry.Telemetry
	requestIDs []string
}

func exercise(t *testing.T) exercised {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tel := newTelemetry(t, testConfig(), telemetry.Options{
		ServiceVersion:      "v0.0.0-test",
		ExtraSpanProcessors: []sdktrace.SpanProcessor{rec},
	})
	mp := tel.MeterProvider()
	if err := telemetry.RegisterLimiter(mp, fakeLimiterStats); err != nil {
		t.Fatalf("RegisterLimiter: %v", err)
	}
	if err := telemetry.RegisterCoalesce(mp, fakeCoalesceStats); err != nil {
		t.Fatalf("RegisterCoalesce: %v", err)
	}
	if err := telemetry.RegisterAuditStore(mp, fakeAuditCapacity, fakeStoreStats); err != nil {
		t.Fatalf("RegisterAuditStore: %v", err)
	}
	if err := telemetry.RegisterCapacity(mp, fakeCoalesceStats); err != nil {
		t.Fatalf("RegisterCapacity: %v", err)
	}
	if err := telemetry.RegisterRestart(mp, func() telemetry.RestartStats {
		return telemetry.RestartStats{UncleanRestarts: 1, LastUncleanRestartUnix: 1.7e9}
	}); err != nil {
		t.Fatalf("RegisterRestart: %v", err)
	}
	if err := telemetry.RegisterWire(mp, func() server.Stats { return server.Stats{} }); err != nil {
		t.Fatalf("RegisterWire: %v", err)
	}
	bao := newObserver(t, mp, telemetry.NewOpenBaoObserver)
	bao.Request(context.Background(), openbao.OpBindingRead, 2*time.Millisecond)
	if err := telemetry.RegisterOpenBaoToken(mp, func() openbao.TokenStats {
		return openbao.TokenStats{Known: true, Renewable: true, Expiry: time.Unix(1_800_000_000, 0)}
	}); err != nil {
		t.Fatalf("RegisterOpenBaoToken: %v", err)
	}
	if err := telemetry.RegisterReload(mp, nil); err != nil {
		t.Fatalf("RegisterReload: %v", err)
	}
	if err := telemetry.RegisterDirectories(mp, func() telemetry.DirectoryStats { return telemetry.DirectoryStats{} }); err != nil {
		t.Fatalf("RegisterDirectories: %v", err)
	}
	obs := newObserver(t, mp, telemetry.NewAuditObserver)
	store, err := audit.Open(audit.Options{Dir: filepath.Join(t.TempDir(), "audit"), Observer: obs})
	if err != nil {
		t.Fatalf("audit.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	sink, err := otelsink.New(counting.New(), mp)
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	// One token per bucket, refilled hourly: the second charge of a key is
	// limited.
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}, sink)
	if err != nil {
		t.Fatalf("limiter.New: %v", err)
	}
	verbs, err := registrar.New(
		registrar.Config{Components: map[string]vocab.Multiplicity{"web": vocab.OnePerDeployment}, MaxWrapTTLSeconds: 60},
		registrar.Deps{Limiter: lim, Audit: store, Backend: fakeBackend{}, TracerProvider: tel.TracerProvider(), Observer: verbObserver(t, mp)},
	)
	if err != nil {
		t.Fatalf("registrar.New: %v", err)
	}

	ctx := context.Background()
	valid := registrar.MintRequest{
		CallerIdentity: identity, ServiceName: "web", Host: "host-1", Component: "web",
		Spec: registrar.Spec{Component: "web", ServiceName: "web"}, WrapTTLSeconds: 30,
	}
	invalid := valid
	invalid.ServiceName = "Not A DNS Label"
	for _, req := range []registrar.MintRequest{valid, valid, invalid, invalid} {
		_, _ = verbs.Mint(ctx, req) // first_mint, throttled, refused, refused (limited)
	}
	_, _ = verbs.Deregister(ctx, registrar.DeregisterRequest{CallerIdentity: identity, ServiceName: "web", Host: "host-1", Component: "web"})
	obs.Appended(audit.PhaseOutcome, 3*time.Millisecond, errors.New("audit: disk full"))

	var ids []string
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == registrar.AttrRequestID {
				ids = append(ids, kv.Value.AsString())
			}
		}
	}
	if len(ids) != 5 {
		t.Fatalf("recorded %d request ids, want 5 (one per invocation)", len(ids))
	}
	return exercised{tel: tel, requestIDs: ids}
}

// sampleNames returns the sorted, distinct sample names of a classic text
// exposition (histograms contribute _bucket, _sum and _count).
func sampleNames(t *testing.T, families map[string]*dto.MetricFamily) []string {
	t.Helper()
	seen := map[string]bool{}
	for name, mf := range families {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			seen[name+"_bucket"], seen[name+"_sum"], seen[name+"_count"] = true, true, true
		default:
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func parseText(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return families
}

func TestMetricsExpositionNamesMatchTheGolden(t *testing.T) {
	ex := exercise(t)
	body, ctype := scrape(t, ex.tel.Handler(), "/metrics", "")
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("Content-Type %q without an Accept header, want text/plain", ctype)
	}
	// The standard go_* and process_* collectors are client_golang's: their
	// names follow its version, not this project, so the golden leaves them
	// out and TestRuntimeCollectorsAndBuildInfoAreExposed checks them.
	var own []string
	for _, n := range sampleNames(t, parseText(t, body)) {
		if !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			own = append(own, n)
		}
	}
	got := strings.Join(own, "\n") + "\n"
	if *update {
		if err := os.WriteFile(goldenNames, []byte(got), 0o644); err != nil {
			t.Fatalf("writing %s: %v", goldenNames, err)
		}
	}
	want, err := os.ReadFile(goldenNames)
	if err != nil {
		t.Fatalf("reading %s (run go test -update to create it): %v", goldenNames, err)
	}
	if got != string(want) {
		t.Errorf("/metrics names differ from %s (go test ./telemetry -run %s -update to accept):\n%s",
			goldenNames, t.Name(), lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

func TestMetricsExpositionCarriesNoIdentityOrRequestID(t *testing.T) {
	ex := exercise(t)
	body, _ := scrape(t, ex.tel.Handler(), "/metrics", "")
	secrets := append([]string{identity, "tenant-7", "secret-caller"}, ex.requestIDs...)
	for name, mf := range parseText(t, body) {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, s := range secrets {
					if strings.Contains(lp.GetName(), s) || strings.Contains(lp.GetValue(), s) {
						t.Errorf("%s has label %s=%q carrying %q", name, lp.GetName(), lp.GetValue(), s)
					}
				}
			}
		}
	}
	// Nor anywhere else in the text (HELP lines), nor in the OpenMetrics
	// exposition's exemplars.
	om, _ := scrape(t, ex.tel.Handler(), "/metrics", "application/openmetrics-text; version=1.0.0")
	for _, s := range secrets {
		if strings.Contains(body, s) {
			t.Errorf("exposition contains %q", s)
		}
		if strings.Contains(om, s) {
			t.Errorf("OpenMetrics exposition contains %q", s)
		}
	}
	// The scope labels are switched off.
	if strings.Contains(body, "otel_scope_") {
		t.Errorf("exposition carries otel_scope_* labels, want none")
	}
}

func TestMetricsExpositionPassesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed: install Debian's prometheus package (apt-get install prometheus) to run this check: " + err.Error())
	}
	ex := exercise(t)
	body, _ := scrape(t, ex.tel.Handler(), "/metrics", "")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\nexposition:\n%s", err, out.String(), body)
	}
}

// exemplarLine matches an OpenMetrics counter sample with an exemplar.
var exemplarLine = regexp.MustCompile(`^(registrar_limited_[a-z_]+_total)\{verb="(mint|deregister)"\} [0-9.e+]+ # \{([^}]*)\} `)

func TestOpenMetricsScrapeCarriesTheSpansTraceIDAsExemplar(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	if !span.SpanContext().IsSampled() {
		t.Fatalf("span not sampled at ratio 1")
	}
	sink.Limited(ctx, limiter.Event{Identity: identity, Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 4})
	span.End()
	traceID := span.SpanContext().TraceID().String()

	body, ctype := scrape(t, tel.Handler(), "/metrics", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q, want application/openmetrics-text", ctype)
	}
	if !strings.HasSuffix(strings.TrimSpace(body), "# EOF") {
		t.Errorf("OpenMetrics body does not end with # EOF")
	}
	found := false
	for _, line := range strings.Split(body, "\n") {
		m := exemplarLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] != "registrar_limited_admission_total" || m[2] != "mint" {
			t.Errorf("unexpected exemplar on %s{verb=%q}: %s", m[1], m[2], line)
			continue
		}
		if !strings.Contains(m[3], `trace_id="`+traceID+`"`) {
			t.Errorf("exemplar %q does not carry trace_id=%q", m[3], traceID)
		}
		found = true
	}
	if !found {
		t.Errorf("no exemplar on registrar_limited_admission_total{verb=\"mint\"}; body:\n%s", body)
	}

	// The classic text format has no exemplars.
	classic, _ := scrape(t, tel.Handler(), "/metrics", "")
	if strings.Contains(classic, "trace_id") {
		t.Errorf("classic text exposition carries an exemplar")
	}
}

// verbObserver is telemetry.NewVerbObserver(mp), failing t on error.
func verbObserver(t *testing.T, mp metric.MeterProvider) registrar.Observer {
	t.Helper()
	o := newObserver(t, mp, telemetry.NewVerbObserver)
	return o
}
