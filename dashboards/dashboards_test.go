//lint:file-ignore SA1019 The shipped dashboard is the classic JSON model (schemaVersion 39) that Grafana 10 and 11 import; dashboardv2 is the Grafana 12 schema, so validating against it would reject what operators actually load.

package dashboards

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

const (
	dashboardFile = "registrar-limiter.json"
	rulesFile     = "alerts.yml"
	rulesTestFile = "alerts_test.yml"
	// goldenNamesFile is the authoritative list of the metric names the
	// daemon exposes, one per line, written by the telemetry package's
	// /metrics golden test.
	goldenNamesFile = "../telemetry/testdata/metrics_names.golden"

	datasourceRef = "${datasource}"
	runbookBase   = "file:///usr/share/doc/registrar-otel/en/metrics.md#"

	limitedPredecision = "registrar_limited_predecision_refusal_total"
	limitedAdmission   = "registrar_limited_admission_total"
	shadowLimited      = "registrar_shadow_limited_total"
)

// wantAlerts are the six alerts of the contract with the severity each must
// carry: critical pages, warning opens a ticket.
var wantAlerts = map[string]string{
	"RegistrarAdmissionThrottleSpike":    "critical",
	"RegistrarPredecisionRefusalFlood":   "warning",
	"RegistrarLimiterSaturated":          "warning",
	"RegistrarAuditAppendFailing":        "critical",
	"RegistrarCountedRecordWriteFailing": "warning",
	"RegistrarDown":                      "critical",
	"RegistrarAuditStoreLow":             "warning",
	"RegistrarAuditStoreCritical":        "critical",
	"RegistrarAuditRetentionHeld":        "critical",
	"RegistrarAuditFileReopened":         "warning",
	"RegistrarAuditSealStalled":          "warning",
	"RegistrarWireRejectionsHigh":        "warning",
	"RegistrarRequestWaitHigh":           "warning",
	"RegistrarBackendErrors":             "critical",
	"RegistrarBackendSlow":               "warning",
	"RegistrarOpenBaoTokenExpiring":      "critical",
	"RegistrarUncleanRestart":            "warning",
	"RegistrarConfigReloadFailed":        "warning",
	"RegistrarInstanceCeilingNear":       "warning",
	"RegistrarCallersRefused":            "warning",
}

// notFromTheDaemon are the series a query may use that Prometheus itself
// produces rather than the daemon: up (scrape health) and ALERTS (the
// dashboard's alert annotation). target_info is exposed by the daemon's
// exporter but is allowed even if the golden omits it.
var notFromTheDaemon = []string{"up", "ALERTS", "target_info"}

// ---------------------------------------------------------------------------
// The dashboard.

// loadDashboard checks the dashboard with the Foundation SDK's strict
// decoder (unknown fields, missing required fields and wrong types are
// errors, down to each panel plugin's options and field config and each
// Prometheus target) and its validation, then returns it decoded for
// inspection.
//
// Two decodes because of the SDK (v0.0.22): its generated strict decoders
// end with `return errs` on a nil cog.BuildErrors, so success is reported
// as a non-nil error holding no errors. At the top that is merely
// misleading (sdkError unwraps it), but a nested plugin decoder's
// "success" makes the parent drop what it decoded: a strictly decoded
// panel comes back with no targets, options or custom field config. The
// strict pass therefore only validates; the lenient json.Unmarshal (which
// still decodes targets as *prometheus.Dataquery and custom field config
// as the plugin's type) is what the tests inspect.
func loadDashboard(t *testing.T) *dashboard.Dashboard {
	t.Helper()
	raw := readDashboard(t)
	if err := checkStrict(raw); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// checkStrict decodes a dashboard strictly and validates it.
func checkStrict(raw []byte) error {
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard
	if err := sdkError(d.UnmarshalJSONStrict(raw)); err != nil {
		return fmt.Errorf("does not decode strictly as a Grafana dashboard:\n%w", err)
	}
	if err := sdkError(d.Validate()); err != nil {
		return fmt.Errorf("does not validate:\n%w", err)
	}
	// The SDK decodes fieldConfig leniently apart from its `custom` part;
	// decode every panel's fieldConfig strictly too, so a misspelt key
	// (say "unti") fails rather than being ignored by Grafana.
	var doc struct {
		Panels []struct {
			Title       string          `json:"title"`
			FieldConfig json.RawMessage `json:"fieldConfig"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	for _, p := range doc.Panels {
		if p.FieldConfig == nil {
			continue
		}
		var fc dashboard.FieldConfigSource
		if err := sdkError(fc.UnmarshalJSONStrict(p.FieldConfig)); err != nil {
			return fmt.Errorf("panel %q: fieldConfig does not decode strictly:\n%w", p.Title, err)
		}
	}
	return nil
}

// sdkError returns nil for the empty cog.BuildErrors the SDK's generated
// code returns on success, and err otherwise.
func sdkError(err error) error {
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		return nil
	}
	return err
}

// allPanels returns every non-row panel (top level and inside rows) and
// every row, in dashboard order.
func allPanels(d *dashboard.Dashboard) (panels []*dashboard.Panel, rows []*dashboard.RowPanel) {
	for _, p := range d.Panels {
		if p.Panel != nil {
			panels = append(panels, p.Panel)
		}
		if p.RowPanel != nil {
			rows = append(rows, p.RowPanel)
			for i := range p.RowPanel.Panels {
				panels = append(panels, &p.RowPanel.Panels[i])
			}
		}
	}
	return panels, rows
}

func title(p *dashboard.Panel) string {
	if p.Title == nil {
		return fmt.Sprintf("<untitled %s panel>", p.Type)
	}
	return *p.Title
}

// promTargets returns a panel's targets as Prometheus queries; a target of
// any other kind is an error.
func promTargets(t *testing.T, p *dashboard.Panel) []*prometheus.Dataquery {
	t.Helper()
	var qs []*prometheus.Dataquery
	for i, tg := range p.Targets {
		q, ok := tg.(*prometheus.Dataquery)
		if !ok {
			t.Errorf("panel %q target %d: got %T, want *prometheus.Dataquery", title(p), i, tg)
			continue
		}
		qs = append(qs, q)
	}
	return qs
}

// query is one PromQL expression and where it was found.
type query struct {
	where string
	expr  string
	// promql is false for Grafana's label_values(...) variable queries,
	// which are not PromQL; expr then holds only their series selector.
	promql bool
}

var labelValuesCall = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// dashboardQueries returns every query of the dashboard: panel targets,
// query variables and annotation queries.
func dashboardQueries(t *testing.T, d *dashboard.Dashboard) []query {
	t.Helper()
	var qs []query
	panels, _ := allPanels(d)
	for _, p := range panels {
		for _, q := range promTargets(t, p) {
			qs = append(qs, query{where: fmt.Sprintf("panel %q target %s", title(p), deref(q.RefId)), expr: q.Expr, promql: true})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != dashboard.VariableTypeQuery {
			continue
		}
		var texts []string
		if v.Definition != nil {
			texts = append(texts, *v.Definition)
		}
		if v.Query != nil && v.Query.String != nil {
			texts = append(texts, *v.Query.String)
		}
		if v.Query != nil && v.Query.Map != nil {
			if s, ok := v.Query.Map["query"].(string); ok {
				texts = append(texts, s)
			}
		}
		if len(texts) == 0 {
			t.Errorf("variable %q: no query", v.Name)
		}
		for _, text := range texts {
			m := labelValuesCall.FindStringSubmatch(text)
			if m == nil {
				t.Errorf("variable %q: query %q is not label_values(<selector>, <label>)", v.Name, text)
				continue
			}
			qs = append(qs, query{where: fmt.Sprintf("variable %q", v.Name), expr: m[1]})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != nil {
			qs = append(qs, query{where: fmt.Sprintf("annotation %q", a.Name), expr: *a.Expr, promql: true})
		}
	}
	return qs
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestDashboardDecodesStrictlyWithTheFoundationSDK(t *testing.T) {
	d := loadDashboard(t)
	if got, want := deref(d.Uid), "registrar-limiter"; got != want {
		t.Errorf("uid: got %q, want %q", got, want)
	}
	if got, want := deref(d.Title), "registrar-otel: limiter and evidence"; got != want {
		t.Errorf("title: got %q, want %q", got, want)
	}
	// Grafana 10.4 and 11.0-11.2 write 39; older schemas are migrated on
	// load, newer ones are not understood by those versions.
	if got, want := d.SchemaVersion, uint16(39); got != want {
		t.Errorf("schemaVersion: got %d, want %d", got, want)
	}
}

// readDashboard is the dashboard file's JSON as the repository ships it.
func readDashboard(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The strict check has teeth: a misspelt key anywhere a Grafana import
// would silently ignore it is an error.
func TestStrictCheckRejectsMisspeltKeys(t *testing.T) {
	raw := readDashboard(t)
	tests := []struct {
		name   string
		mutate func(d map[string]any, panel map[string]any)
	}{
		{"top level", func(d, _ map[string]any) { d["schemaVersoin"] = 39 }},
		{"panel", func(_, p map[string]any) { p["descripton"] = "x" }},
		{"prometheus target", func(_, p map[string]any) { p["targets"].([]any)[0].(map[string]any)["legendFromat"] = "x" }},
		{"timeseries options", func(_, p map[string]any) { p["options"].(map[string]any)["legnd"] = map[string]any{} }},
		{"field config defaults", func(_, p map[string]any) {
			p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unti"] = "s"
		}},
		{"timeseries custom field config", func(_, p map[string]any) {
			p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["custom"].(map[string]any)["stackng"] = map[string]any{}
		}},
		{"variable", func(d, _ map[string]any) {
			d["templating"].(map[string]any)["list"].([]any)[0].(map[string]any)["multy"] = true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			var panel map[string]any
			for _, p := range d["panels"].([]any) {
				if p := p.(map[string]any); p["type"] == "timeseries" {
					panel = p
					break
				}
			}
			if panel == nil {
				t.Fatal("no timeseries panel to mutate")
			}
			tt.mutate(d, panel)
			mutated, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkStrict(mutated); err == nil {
				t.Errorf("checkStrict accepted a dashboard with a misspelt key in the %s", tt.name)
			}
		})
	}
}

func TestDashboardRowsGroupLimiterEvidenceAndAuditStore(t *testing.T) {
	d := loadDashboard(t)
	_, rows := allPanels(d)
	var got []string
	for _, r := range rows {
		got = append(got, deref(r.Title))
	}
	if want := []string{"Limiter", "Evidence", "Audit store: $instance", "Wire", "Callers and registrations", "OpenBao backend"}; !slices.Equal(got, want) {
		t.Errorf("rows: got %q, want %q", got, want)
	}
	seen := map[uint32]string{}
	panels, _ := allPanels(d)
	for _, p := range panels {
		if p.Type != "timeseries" && p.Type != "stat" {
			t.Errorf("panel %q: type %q, want timeseries or stat", title(p), p.Type)
		}
		if p.Id == nil {
			t.Errorf("panel %q: no id", title(p))
			continue
		}
		if other, dup := seen[*p.Id]; dup {
			t.Errorf("panels %q and %q share id %d", other, title(p), *p.Id)
		}
		seen[*p.Id] = title(p)
		if p.GridPos == nil {
			t.Errorf("panel %q: no gridPos", title(p))
		}
	}
}

func TestDashboardHasADatasourceVariableUsedByEveryQuery(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]dashboard.VariableModel{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	ds, ok := vars["datasource"]
	switch {
	case !ok:
		t.Fatal(`no "datasource" variable`)
	case ds.Type != dashboard.VariableTypeDatasource:
		t.Errorf("variable datasource: type %q, want %q", ds.Type, dashboard.VariableTypeDatasource)
	case ds.Query == nil || ds.Query.String == nil || *ds.Query.String != "prometheus":
		t.Errorf("variable datasource: query %+v, want \"prometheus\"", ds.Query)
	}
	for _, name := range []string{"job", "instance"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %q variable", name)
			continue
		}
		if v.Type != dashboard.VariableTypeQuery {
			t.Errorf("variable %q: type %q, want query", name, v.Type)
		}
		checkRef(t, "variable "+strconv.Quote(name), v.Datasource)
	}

	panels, _ := allPanels(d)
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		checkRef(t, fmt.Sprintf("panel %q", title(p)), p.Datasource)
		qs := promTargets(t, p)
		if len(qs) == 0 {
			t.Errorf("panel %q: no targets", title(p))
		}
		for _, q := range qs {
			checkRef(t, fmt.Sprintf("panel %q target %s", title(p), deref(q.RefId)), q.Datasource)
		}
	}
	for _, a := range d.Annotations.List {
		if a.BuiltIn != nil && *a.BuiltIn == 1 {
			continue // Grafana's own annotations and alerts, from its own store
		}
		checkRef(t, fmt.Sprintf("annotation %q", a.Name), a.Datasource)
	}
}

func checkRef(t *testing.T, where string, ref *common.DataSourceRef) {
	t.Helper()
	if ref == nil {
		t.Errorf("%s: no datasource, want uid %q", where, datasourceRef)
		return
	}
	if got := deref(ref.Uid); got != datasourceRef {
		t.Errorf("%s: datasource uid %q, want %q", where, got, datasourceRef)
	}
	if got := deref(ref.Type); got != "prometheus" {
		t.Errorf("%s: datasource type %q, want prometheus", where, got)
	}
}

// Every daemon selector is narrowed to the chosen job and instances, or the
// variables would be decoration.
func TestDashboardQueriesAreScopedToTheChosenJobAndInstance(t *testing.T) {
	d := loadDashboard(t)
	selector := regexp.MustCompile(`\b(registrar_[a-zA-Z0-9_:]*|up)\b\s*(\{[^}]*\})?`)
	panels, _ := allPanels(d)
	for _, p := range panels {
		for _, q := range promTargets(t, p) {
			for _, m := range selector.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(m[2], `job=~"$job"`) || !strings.Contains(m[2], `instance=~"$instance"`) {
					t.Errorf("panel %q target %s: selector %s%s is not scoped by job=~\"$job\" and instance=~\"$instance\"",
						title(p), deref(q.RefId), m[1], m[2])
				}
			}
		}
	}
}

func TestEveryPanelHasADescription(t *testing.T) {
	d := loadDashboard(t)
	panels, _ := allPanels(d)
	for _, p := range panels {
		desc := strings.TrimSpace(deref(p.Description))
		// "What it shows, what normal looks like, what to do" does not fit
		// in a few words.
		if len(desc) < 80 {
			t.Errorf("panel %q: description %q is missing or too short to help on call", title(p), desc)
		}
		if !strings.Contains(strings.ToLower(desc), "normal") {
			t.Errorf("panel %q: description does not say what normal looks like", title(p))
		}
	}
}

// The two limited counters mean different things and must never be shown
// as one number: separate panels, no expression naming both, no stacking.
func TestLimitedBucketsAreSeparatePanelsAndNeverSummed(t *testing.T) {
	d := loadDashboard(t)
	for _, q := range dashboardQueries(t, d) {
		names := metricNames(q.expr)
		if slices.Contains(names, limitedPredecision) && slices.Contains(names, limitedAdmission) {
			t.Errorf("%s: one expression uses both %s and %s: %s", q.where, limitedPredecision, limitedAdmission, q.expr)
		}
	}

	panels, _ := allPanels(d)
	var predecisionPanels, admissionPanels int
	for _, p := range panels {
		var usesPre, usesAdm bool
		for _, q := range promTargets(t, p) {
			names := metricNames(q.Expr)
			usesPre = usesPre || slices.Contains(names, limitedPredecision)
			usesAdm = usesAdm || slices.Contains(names, limitedAdmission)
		}
		if usesPre && usesAdm {
			t.Errorf("panel %q shows both limited buckets; they belong in separate panels", title(p))
		}
		if usesPre {
			predecisionPanels++
		}
		if usesAdm {
			admissionPanels++
		}
		if (usesPre || usesAdm) && p.Type == "timeseries" {
			if mode := stackingMode(t, p); mode != common.StackingModeNone {
				t.Errorf("panel %q: stacking mode %q, want %q (limited series are never stacked)", title(p), mode, common.StackingModeNone)
			}
		}
	}
	if predecisionPanels == 0 || admissionPanels == 0 {
		t.Errorf("got %d panels for %s and %d for %s, want at least one each",
			predecisionPanels, limitedPredecision, admissionPanels, limitedAdmission)
	}
}

// stackingMode is a timeseries panel's stacking mode; Grafana's default,
// when the panel does not set one, is none.
func stackingMode(t *testing.T, p *dashboard.Panel) common.StackingMode {
	t.Helper()
	if p.FieldConfig == nil || p.FieldConfig.Defaults.Custom == nil {
		return common.StackingModeNone
	}
	custom, ok := p.FieldConfig.Defaults.Custom.(*common.GraphFieldConfig)
	if !ok {
		t.Fatalf("panel %q: custom field config decoded as %T, want *common.GraphFieldConfig", title(p), p.FieldConfig.Defaults.Custom)
	}
	if custom.Stacking == nil || custom.Stacking.Mode == nil {
		return common.StackingModeNone
	}
	return *custom.Stacking.Mode
}

// Series with a `bucket` label (counted records, overflow charges) are
// aggregated by bucket: summing them away would add the two buckets.
func TestBucketLabelledSeriesKeepTheirBucket(t *testing.T) {
	checkAggregationsKeep(t, "bucket", "registrar_coalesce_records_total", "registrar_limiter_overflow_charges_total", shadowLimited)
}

// Each limited counter has a panel per caller policy (sum by policy), the
// shadow counter a panel of its own by policy and bucket, and the shadow
// counter is never in an expression with a limited counter: a shadow
// charge is not a limited invocation.
func TestLimitedCountersHaveAPolicyPanelAndShadowHasItsOwn(t *testing.T) {
	d := loadDashboard(t)
	byPolicy := regexp.MustCompile(`^sum by \(policy\) \(rate\((registrar_[a-z_]+_total)\{[^}]*\}\[\$__rate_interval\]\)\)$`)
	shadowPanel := regexp.MustCompile(`^sum by \(policy, bucket\) \(rate\(` + shadowLimited + `\{[^}]*\}\[\$__rate_interval\]\)\)$`)
	seen := map[string]bool{}
	for _, q := range dashboardQueries(t, d) {
		names := metricNames(q.expr)
		if slices.Contains(names, shadowLimited) && (slices.Contains(names, limitedPredecision) || slices.Contains(names, limitedAdmission)) {
			t.Errorf("%s: the shadow counter in one expression with a limited counter: %s", q.where, q.expr)
		}
		if m := byPolicy.FindStringSubmatch(q.expr); m != nil {
			seen[m[1]] = true
		}
		if shadowPanel.MatchString(q.expr) {
			seen[shadowLimited] = true
		}
	}
	for _, name := range []string{limitedPredecision, limitedAdmission, shadowLimited} {
		if !seen[name] {
			t.Errorf("no panel shows %s per caller policy", name)
		}
	}
}

// The limiter's entries and cap are aggregated by pool: the two pools
// (remote, local) have a cap each, so a line of their sum against one cap
// would show a pool at its cap that is not, or hide one that is.
func TestPoolLabelledSeriesKeepTheirPool(t *testing.T) {
	checkAggregationsKeep(t, "pool", "registrar_limiter_entries", "registrar_limiter_capacity")
}

// checkAggregationsKeep fails for every aggregation, in a dashboard query
// of one of series, that does not keep label.
func checkAggregationsKeep(t *testing.T, label string, series ...string) {
	t.Helper()
	d := loadDashboard(t)
	aggregation := regexp.MustCompile(`\b(sum|avg|max|min|count)\b\s*(by\s*\(([^)]*)\))?\s*\(`)
	found := false
	for _, q := range dashboardQueries(t, d) {
		if !slices.ContainsFunc(metricNames(q.expr), func(n string) bool { return slices.Contains(series, n) }) {
			continue
		}
		found = true
		for _, m := range aggregation.FindAllStringSubmatch(q.expr, -1) {
			if !slices.Contains(strings.Fields(strings.ReplaceAll(m[3], ",", " ")), label) {
				t.Errorf("%s: aggregation %q drops the %s label: %s", q.where, strings.TrimSpace(m[0]), label, q.expr)
			}
		}
	}
	if !found {
		t.Errorf("no dashboard query reads %q", series)
	}
}

// ---------------------------------------------------------------------------
// Metric names.

var (
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers      = regexp.MustCompile(`\{[^{}]*\}`)
	rangeOrSub    = regexp.MustCompile(`\[[^\[\]]*\]`)
	offset        = regexp.MustCompile(`(?i)\boffset\s+-?[0-9a-z]+`)
	grouping      = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	number        = regexp.MustCompile(`(?i)\b(?:0x[0-9a-f]+|[0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?)\b`)
	identifier    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promqlKeywords are identifiers that are neither metrics nor followed by
// a parenthesis (group_left and group_right take their label list only
// when they copy labels).
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}

func stripStrings(expr string) string { return stringLiteral.ReplaceAllString(expr, `""`) }

// metricNames returns the metric names a PromQL expression selects, in
// order of appearance, without duplicates: identifiers outside string
// literals, label matchers, ranges, offsets and grouping clauses that are not
// keywords and not followed by "(" (a function or aggregation).
func metricNames(expr string) []string {
	s := stripStrings(expr)
	s = matchers.ReplaceAllString(s, " ")
	s = rangeOrSub.ReplaceAllString(s, " ")
	s = offset.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	s = number.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\r\n"), "(") {
			continue
		}
		if slices.Contains(promqlKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNamesExtractsSelectorsOnly(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (verb) (rate(registrar_limited_admission_total{job=~"$job",verb="mint"}[$__rate_interval]))`,
			[]string{"registrar_limited_admission_total"}},
		{`histogram_quantile(0.99, sum by (le, verb) (rate(registrar_invocation_duration_seconds_bucket{result=~"a|b"}[5m])))`,
			[]string{"registrar_invocation_duration_seconds_bucket"}},
		{"max by (job, instance) (up{job=\"registrar-otel\"}) == 0\nor\nabsent(up{job=\"registrar-otel\"})",
			[]string{"up"}},
		{`label_replace(max by (job) (registrar_limiter_entries) >= 256, "condition", "entries_at_cap", "", "")`,
			[]string{"registrar_limiter_entries"}},
		{`sum(rate(a_total[5m])) / sum(rate(b_total[5m])) > 0.1 and sum(rate(a_total[1h] offset 1d)) > 1e-3`,
			[]string{"a_total", "b_total"}},
		{`sum(rate(x[5m])) by (bucket)`, []string{"x"}},
		{"sum by (verb, policy) (rate(a_total[5m]))\n/ on (verb) group_left\nsum by (verb) (rate(b_total[5m]))", []string{"a_total", "b_total"}},
		{`a / on (verb) group_right (policy) b`, []string{"a", "b"}},
		{`60 * sum(increase(registrar_coalesce_records_total[$__range]))`, []string{"registrar_coalesce_records_total"}},
		{`{__name__="only_in_a_matcher"}`, nil},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q): got %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// loadGoldenNames reads the exposed-names golden. Its absence fails the
// test: without it nothing proves the dashboard and rules query real series.
func loadGoldenNames(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(goldenNamesFile)
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(goldenNamesFile)
		t.Fatalf("%s (%s) does not exist: it is the golden list of metric names the daemon exposes "+
			"(one per line, written by the telemetry package's /metrics golden test, `make golden`); "+
			"without it the names used by %s and %s cannot be checked", goldenNamesFile, abs, dashboardFile, rulesFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[line] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no names", goldenNamesFile)
	}
	return names
}

func TestEveryMetricNameIsOneTheDaemonExposes(t *testing.T) {
	var qs []query
	qs = append(qs, dashboardQueries(t, loadDashboard(t))...)
	for _, r := range loadRules(t) {
		qs = append(qs, query{where: "alert " + r.alert, expr: r.expr, promql: true})
	}
	golden := loadGoldenNames(t)
	used := 0
	for _, q := range qs {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric name found in %q", q.where, q.expr)
		}
		for _, name := range names {
			used++
			if !golden[name] && !slices.Contains(notFromTheDaemon, name) {
				t.Errorf("%s: metric %q is not in %s: %s", q.where, name, goldenNamesFile, q.expr)
			}
		}
	}
	if used == 0 {
		t.Fatal("no metric names extracted at all")
	}
}

// ---------------------------------------------------------------------------
// The alert rules.

// rule is one alerting rule as read from alerts.yml.
type rule struct {
	alert  string
	expr   string
	fields map[string]string // for, severity, summary, description, runbook_url
}

var (
	yamlKey     = regexp.MustCompile(`^(\s*)(?:- )?(alert|expr|for|severity|summary|description|runbook_url|name):\s*(.*)$`)
	yamlComment = regexp.MustCompile(`^\s*(#.*)?$`)
)

// loadRules reads alerts.yml with a line-oriented reader sized for that
// file (the module has no YAML parser, and promtool checks the YAML
// itself): `- alert:` starts a rule; the keys above are read as plain or
// quoted scalars, or as `|`/`>` block scalars (the lines indented deeper
// than the key, joined with newlines or spaces).
func loadRules(t *testing.T) []rule {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n")
	var (
		rules  []rule
		groups []string
	)
	for i := 0; i < len(lines); i++ {
		if yamlComment.MatchString(lines[i]) {
			continue
		}
		m := yamlKey.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, key, value := len(m[1]), m[2], strings.TrimSpace(m[3])
		if strings.HasPrefix(value, "|") || strings.HasPrefix(value, ">") {
			folded := value[0] == '>'
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || leadingSpaces(lines[i+1]) > indent) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			sep := "\n"
			if folded {
				sep = " "
			}
			value = strings.TrimSpace(strings.Join(block, sep))
		} else if uq, err := strconv.Unquote(value); err == nil && strings.HasPrefix(value, `"`) {
			value = uq
		}
		switch key {
		case "name":
			groups = append(groups, value)
		case "alert":
			rules = append(rules, rule{alert: value, fields: map[string]string{}})
		default:
			if len(rules) == 0 {
				t.Fatalf("%s:%d: %s before the first alert", rulesFile, i+1, key)
			}
			r := &rules[len(rules)-1]
			if key == "expr" {
				r.expr = value
			} else {
				r.fields[key] = value
			}
		}
	}
	if want := []string{"registrar-otel"}; !slices.Equal(groups, want) {
		t.Errorf("%s: groups %q, want %q", rulesFile, groups, want)
	}
	return rules
}

func leadingSpaces(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }

func TestAlertRulesAreTheSixOfTheContractWithTheirAnnotations(t *testing.T) {
	rules := loadRules(t)
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.alert] {
			t.Errorf("alert %s defined twice", r.alert)
		}
		seen[r.alert] = true
		wantSeverity, known := wantAlerts[r.alert]
		if !known {
			t.Errorf("alert %s is not one of the contract's six", r.alert)
			continue
		}
		if r.expr == "" {
			t.Errorf("alert %s: no expr", r.alert)
		}
		if r.fields["for"] == "" {
			t.Errorf("alert %s: no for: duration", r.alert)
		}
		if got := r.fields["severity"]; got != wantSeverity {
			t.Errorf("alert %s: severity %q, want %q", r.alert, got, wantSeverity)
		}
		if r.fields["summary"] == "" {
			t.Errorf("alert %s: no summary", r.alert)
		}
		if d := r.fields["description"]; !strings.Contains(d, "{{ $value") || !strings.Contains(d, "{{ $labels.") {
			t.Errorf("alert %s: description %q does not show the value and labels", r.alert, d)
		}
		if got, want := r.fields["runbook_url"], runbookBase+strings.ToLower(r.alert); got != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.alert, got, want)
		}
		names := metricNames(r.expr)
		if slices.Contains(names, limitedPredecision) && slices.Contains(names, limitedAdmission) {
			t.Errorf("alert %s: expression uses both %s and %s: %s", r.alert, limitedPredecision, limitedAdmission, r.expr)
		}
	}
	for name := range wantAlerts {
		if !seen[name] {
			t.Errorf("alert %s is missing from %s", name, rulesFile)
		}
	}
}

// ---------------------------------------------------------------------------
// promtool.

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed: " + err.Error() + " (Debian: apt-get install prometheus)")
	}
	return path
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	runPromtool(t, ".", "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
}

func TestAlertRulesPassTheirPromtoolUnitTests(t *testing.T) {
	runPromtool(t, ".", "test", "rules", rulesTestFile)
}

// Every dashboard query is real PromQL: each becomes a recording rule in a
// throwaway rule file that promtool parses (Grafana's interval variables
// replaced by durations; $job and $instance only occur inside strings).
func TestDashboardQueriesParseAsPromQL(t *testing.T) {
	promtool(t)
	grafanaVars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
	var buf bytes.Buffer
	buf.WriteString("groups:\n  - name: dashboard-queries\n    rules:\n")
	n := 0
	for _, q := range dashboardQueries(t, loadDashboard(t)) {
		if !q.promql {
			continue
		}
		expr, err := json.Marshal(grafanaVars.Replace(q.expr)) // a JSON string is a YAML scalar
		if err != nil {
			t.Fatal(err)
		}
		n++
		fmt.Fprintf(&buf, "      # %s\n      - record: dashboard:query_%d\n        expr: %s\n", q.where, n, expr)
	}
	if n == 0 {
		t.Fatal("no dashboard queries")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-queries.yml"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "check", "rules", "dashboard-queries.yml")
}

// ---------------------------------------------------------------------------
// The dashboard-linter rules (github.com/grafana/dashboard-linter), checked
// by this project's own test on every panel, including panels added later.

// grafanaUnits are unit ids Grafana's value formats define (the subset a
// dashboard like this one plausibly uses; add to it when a panel needs
// another real Grafana unit).
var grafanaUnits = []string{
	"none", "short", "percent", "percentunit", "sci", "locale", "bool", "string",
	"ns", "µs", "ms", "s", "m", "h", "d", "dtdurationms", "dtdurations", "dateTimeAsIso", "dateTimeFromNow",
	"reqps", "rps", "wps", "rpm", "wpm", "ops", "opm", "cps", "cpm", "iops",
	"bytes", "decbytes", "bits", "decbits", "kbytes", "mbytes", "gbytes", "deckbytes", "decmbytes", "decgbytes",
	"Bps", "binBps", "bps", "binbps", "KBs", "MBs", "GBs",
}

// rateCall matches rate(, irate( and increase( and the range of the
// selector they are applied to.
var rateCall = regexp.MustCompile(`\b(rate|irate|increase)\s*\(\s*[^\[]*\[([^\]]*)\]`)

// Each panel: a title, a description, a valid unit; each rate, irate and
// increase over $__rate_interval (increase may also total $__range, the
// linter's documented exception for range totals); the limited-rate
// timeseries show exemplars; a division cannot show NaN for a verb with no
// traffic, nor a quantile for a histogram with no observation.
func TestDashboardFollowsTheLinterRules(t *testing.T) {
	d := loadDashboard(t)
	panels, _ := allPanels(d)
	for _, p := range panels {
		if strings.TrimSpace(deref(p.Title)) == "" {
			t.Errorf("panel %d: no title", deref32(p.Id))
		}
		if strings.TrimSpace(deref(p.Description)) == "" {
			t.Errorf("panel %q: no description", title(p))
		}
		unit := ""
		if p.FieldConfig != nil {
			unit = deref(p.FieldConfig.Defaults.Unit)
		}
		if !slices.Contains(grafanaUnits, unit) {
			t.Errorf("panel %q: unit %q is not one of Grafana's units %v", title(p), unit, grafanaUnits)
		}
		for _, q := range promTargets(t, p) {
			where := fmt.Sprintf("panel %q target %s", title(p), deref(q.RefId))
			for _, m := range rateCall.FindAllStringSubmatch(q.Expr, -1) {
				if m[2] != "$__rate_interval" && !(m[1] == "increase" && m[2] == "$__range") {
					t.Errorf("%s: %s(...[%s]): rates use [$__rate_interval]", where, m[1], m[2])
				}
			}
			names := metricNames(q.Expr)
			limited := slices.Contains(names, limitedPredecision) || slices.Contains(names, limitedAdmission)
			if limited && p.Type == "timeseries" && !strings.Contains(q.Expr, "/") && (q.Exemplar == nil || !*q.Exemplar) {
				t.Errorf("%s: a limited-rate series without exemplars: set \"exemplar\": true so a spike links to its trace", where)
			}
			if strings.Contains(stripStrings(q.Expr), "/") && !regexp.MustCompile(`>\s*0\s*\)\s*or\b`).MatchString(q.Expr) {
				t.Errorf("%s: a ratio without a guard shows NaN when the denominator is 0; write A / (B > 0) or A * 0:\n%s", where, q.Expr)
			}
			if strings.Contains(q.Expr, "histogram_quantile") && !regexp.MustCompile(`\band\s+on\s*\([^)]*\)[^>]*>\s*0\s*$`).MatchString(strings.TrimSpace(q.Expr)) {
				t.Errorf("%s: a quantile without a guard shows NaN with no observation; add `and on (...) sum(rate(X_count[...])) > 0`:\n%s", where, q.Expr)
			}
		}
	}
	// At least the two limited-rate panels carry exemplars.
	withExemplars := 0
	for _, p := range panels {
		for _, q := range promTargets(t, p) {
			if q.Exemplar != nil && *q.Exemplar {
				withExemplars++
			}
		}
	}
	if withExemplars < 2 {
		t.Errorf("%d targets show exemplars, want at least the two limited-rate panels", withExemplars)
	}
}

// The template variables as the linter wants them: one datasource
// variable named datasource labelled "Data source"; job and instance
// query variables on it, labelled "Job" and "Instance", multi-select with an All value
// of .+, refreshed on time range change.
func TestDashboardVariablesFollowTheLinterRules(t *testing.T) {
	d := loadDashboard(t)
	var datasources int
	vars := map[string]dashboard.VariableModel{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		if v.Type == dashboard.VariableTypeDatasource {
			datasources++
		}
	}
	if datasources != 1 {
		t.Errorf("%d datasource variables, want exactly one", datasources)
	}
	if ds := vars["datasource"]; deref(ds.Label) != "Data source" {
		t.Errorf("variable datasource: label %q, want \"Data source\"", deref(ds.Label))
	}
	for _, name := range []string{"job", "instance"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %s variable", name)
			continue
		}
		// template-job-rule and template-instance-rule want the name in
		// title case ("Job", "Instance").
		if want := strings.ToUpper(name[:1]) + name[1:]; deref(v.Label) != want {
			t.Errorf("variable %s: label %q, want %q", name, deref(v.Label), want)
		}
		if v.Multi == nil || !*v.Multi || v.IncludeAll == nil || !*v.IncludeAll || deref(v.AllValue) != ".+" {
			t.Errorf("variable %s: multi %v, includeAll %v, allValue %q; want multi-select with All = .+",
				name, v.Multi != nil && *v.Multi, v.IncludeAll != nil && *v.IncludeAll, deref(v.AllValue))
		}
		if v.Refresh == nil || *v.Refresh != dashboard.VariableRefreshOnTimeRangeChanged {
			t.Errorf("variable %s: refresh %v, want on time range change", name, v.Refresh)
		}
		checkRef(t, "variable "+name, v.Datasource)
	}
}

func deref32(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// The throttle page fires per caller policy: both of its admission
// aggregations keep the policy label (the ratio's and the floor's), the
// denominator is matched on the labels it has, and the summary and
// description name the policy. promtool's cases show it firing for the
// throttled policy only.
func TestTheThrottlePageFiresPerPolicy(t *testing.T) {
	var r *rule
	for _, x := range loadRules(t) {
		if x.alert == "RegistrarAdmissionThrottleSpike" {
			r = &x
		}
	}
	if r == nil {
		t.Fatal("no RegistrarAdmissionThrottleSpike rule")
	}
	agg := regexp.MustCompile(`sum by \(([^)]*)\) \(rate\(` + limitedAdmission + `\[5m\]\)\)`)
	ms := agg.FindAllStringSubmatch(r.expr, -1)
	if len(ms) != 2 {
		t.Fatalf("expr aggregates %s %d times, want 2 (ratio and floor): %s", limitedAdmission, len(ms), r.expr)
	}
	for _, m := range ms {
		if !slices.Contains(strings.Fields(strings.ReplaceAll(m[1], ",", " ")), "policy") {
			t.Errorf("aggregation by (%s) drops the policy label: %s", m[1], r.expr)
		}
	}
	if !strings.Contains(r.expr, "/ on (job, instance, verb) group_left") {
		t.Errorf("the ratio does not match the policy-less denominator on (job, instance, verb) with group_left: %s", r.expr)
	}
	for _, f := range []string{"summary", "description"} {
		if !strings.Contains(r.fields[f], "$labels.policy") {
			t.Errorf("%s %q does not name the policy", f, r.fields[f])
		}
	}
}
