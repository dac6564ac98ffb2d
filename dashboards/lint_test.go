package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The rules of grafana's dashboard-linter (github.com/grafana/dashboard-linter,
// lint/rules.go) and where this package enforces each, so that the linter
// run on registrar-limiter.json reports nothing:
//
//	uneditable-dashboard-rule            linterProblems: "editable": false
//	template-datasource-rule             TestDashboardVariablesFollowTheLinterRules, TestDashboardHasADatasourceVariableUsedByEveryQuery
//	template-job-rule                    linterProblems and TestDashboardVariablesFollowTheLinterRules: label "Job", multi, allValue .+, on ${datasource}
//	template-instance-rule               the same for "Instance"
//	template-label-promql-rule           dashboardQueries: every variable query is label_values(<selector>, <label>)
//	template-on-time-change-reload-rule  TestDashboardVariablesFollowTheLinterRules (refresh 2)
//	panel-datasource-rule                TestDashboardHasADatasourceVariableUsedByEveryQuery
//	panel-title-description-rule         TestDashboardFollowsTheLinterRules, TestEveryPanelHasADescription
//	panel-units-rule                     TestDashboardFollowsTheLinterRules (grafanaUnits)
//	panel-no-targets-rule                TestDashboardHasADatasourceVariableUsedByEveryQuery
//	target-promql-rule                   TestDashboardQueriesParseAsPromQL (promtool)
//	target-rate-interval-rule            TestDashboardFollowsTheLinterRules
//	target-job-rule, target-instance-rule  TestDashboardQueriesAreScopedToTheChosenJobAndInstance
//	target-counter-agg-rule              linterProblems: every *_total selector directly inside rate, irate or increase
//
// target-logql-rule and target-logql-auto-rule apply to Loki targets only;
// the dashboard has none (every target is a *prometheus.Dataquery, checked
// by promTargets).
//
// linterProblems also enforces the on-call rules of this project: exemplars
// on every histogram target, a red threshold on every panel whose normal is
// zero, per-minute units on per-minute expressions, one value per instance
// on the stat panels, and an audit store row repeated per instance.

// normalIsZero matches a panel description that says its normal value is
// zero.
var normalIsZero = regexp.MustCompile(`Normal: (always |flat at )?0[.;]`)

// perMinuteUnits are Grafana's per-minute throughput units.
var perMinuteUnits = []string{"cpm", "opm", "rpm", "wpm"}

// rateUnits are the units a rate (per second or per minute) may carry.
var rateUnits = []string{"reqps", "rps", "wps", "ops", "cps", "iops", "cpm", "opm", "rpm", "wpm", "percentunit", "percent", "s", "ms", "none"}

var (
	counterSelector = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*_total\b`)
	rangeFuncOpen   = regexp.MustCompile(`\b(rate|irate|increase)\s*\(\s*$`)
	rangeAfter      = regexp.MustCompile(`^\s*(\{[^{}]*\})?\s*\[`)
	aggregationCall = regexp.MustCompile(`\b(sum|avg|max|min|count)\b\s*(by\s*\(([^)]*)\))?\s*\(`)
)

// dashPanel is the part of a panel linterProblems reads, decoded from the
// raw JSON (so that a scratch copy with any mutation can be checked).
type dashPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Repeat      string `json:"repeat"`
	Targets     []struct {
		Expr         string `json:"expr"`
		Exemplar     *bool  `json:"exemplar"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				ThresholdsStyle struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// linterProblems returns what the linter rules above (those not covered by
// the typed tests) and the on-call rules find wrong in a dashboard's JSON;
// t fails at once when raw is not a dashboard's JSON at all.
func linterProblems(t *testing.T, raw []byte) []string {
	t.Helper()
	var d struct {
		Editable   *bool       `json:"editable"`
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Label      string `json:"label"`
				Multi      bool   `json:"multi"`
				AllValue   string `json:"allValue"`
				Datasource *struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	// uneditable-dashboard-rule. Grafana's default when the key is absent
	// is editable, so the key must be there and false.
	if d.Editable == nil || *d.Editable {
		add("uneditable-dashboard-rule: the dashboard is editable; set \"editable\": false")
	}
	// template-job-rule, template-instance-rule.
	for _, name := range []string{"job", "instance"} {
		want := strings.ToUpper(name[:1]) + name[1:]
		found := false
		for _, v := range d.Templating.List {
			if v.Name != name {
				continue
			}
			found = true
			if v.Label != want {
				add("template-%s-rule: %s template should be labelled %q, is %q", name, name, want, v.Label)
			}
			if v.Type != "query" || !v.Multi || v.AllValue != ".+" || v.Datasource == nil || v.Datasource.UID != datasourceRef {
				add("template-%s-rule: %s template must be a multi-select query on %s with allValue .+", name, name, datasourceRef)
			}
		}
		if !found {
			add("template-%s-rule: no %s template", name, name)
		}
	}

	sawAuditRow := false
	for _, p := range d.Panels {
		if p.Type == "row" {
			if strings.HasPrefix(p.Title, "Audit store") {
				sawAuditRow = true
				if p.Repeat != "instance" {
					add("row %q: repeat %q, want \"instance\" (one audit store row per daemon)", p.Title, p.Repeat)
				}
			}
			continue
		}
		def := p.FieldConfig.Defaults
		for _, t := range p.Targets {
			where := fmt.Sprintf("panel %q target %s", p.Title, t.RefID)
			expr := stripStrings(t.Expr)
			// target-counter-agg-rule.
			for _, loc := range counterSelector.FindAllStringIndex(expr, -1) {
				if !rangeFuncOpen.MatchString(expr[:loc[0]]) || !rangeAfter.MatchString(expr[loc[1]:]) {
					add("target-counter-agg-rule: %s: counter %s is not aggregated with rate, irate or increase", where, expr[loc[0]:loc[1]])
				}
			}
			// Exemplars on every histogram.
			if strings.Contains(expr, "_bucket") && (t.Exemplar == nil || !*t.Exemplar) {
				add("%s: a histogram target without exemplars; set \"exemplar\": true", where)
			}
			// Per-minute units.
			if strings.HasPrefix(strings.TrimSpace(expr), "60 *") && !slices.Contains(perMinuteUnits, def.Unit) {
				add("%s: a per-minute expression with unit %q, want one of %v", where, def.Unit, perMinuteUnits)
			}
			if rateCall.MatchString(expr) && !strings.Contains(expr, "histogram_quantile") && !strings.Contains(expr, "$__range") && !slices.Contains(rateUnits, def.Unit) {
				add("%s: a rate with unit %q, want a rate unit %v", where, def.Unit, rateUnits)
			}
			// One value per instance on the stat panels; beside them, a
			// target whose legend is allSelected may sum them (the
			// deployment's figure, when registrars share a budget).
			if p.Type == "stat" && t.LegendFormat != allSelected {
				ms := aggregationCall.FindAllStringSubmatch(expr, -1)
				for _, m := range ms {
					if !slices.Contains(strings.Fields(strings.ReplaceAll(m[3], ",", " ")), "instance") {
						add("%s: stat aggregation %q drops the instance label: with All selected no one can tell which daemon differs", where, strings.TrimSpace(m[0]))
					}
				}
			}
		}
		if p.Type == "stat" && len(p.Targets) > 0 && !slices.ContainsFunc(p.Targets, func(t struct {
			Expr         string `json:"expr"`
			Exemplar     *bool  `json:"exemplar"`
			RefID        string `json:"refId"`
			LegendFormat string `json:"legendFormat"`
		}) bool {
			return t.LegendFormat != allSelected
		}) {
			add("panel %q: only %q targets: a stat panel shows one value per instance beside their sum", p.Title, allSelected)
		}
		// A red threshold where normal is zero.
		if normalIsZero.MatchString(p.Description) {
			red := false
			for _, s := range def.Thresholds.Steps {
				if s.Color == "red" && s.Value != nil && *s.Value > 0 && *s.Value <= 1 {
					red = true
				}
			}
			if !red {
				add("panel %q: normal is 0 but no red threshold step in (0, 1]", p.Title)
			}
			if p.Type == "timeseries" && def.Custom.ThresholdsStyle.Mode == "off" {
				add("panel %q: normal is 0 but the threshold is not drawn (thresholdsStyle off)", p.Title)
			}
		}
	}
	if !sawAuditRow {
		add("no Audit store row")
	}
	return probs
}

// allSelected is the legend of a stat panel's target that sums the
// selected instances, beside the per-instance one.
const allSelected = "all selected"

func TestDashboardPassesTheLinterAndOnCallRules(t *testing.T) {
	raw := readDashboard(t)
	probs := linterProblems(t, raw)
	for _, p := range probs {
		t.Error(p)
	}
}

// Each rule has teeth: a scratch copy breaking it is reported.
func TestLinterProblemsCatchesEachBreak(t *testing.T) {
	raw := readDashboard(t)
	panelWhere := func(d map[string]any, pred func(p map[string]any) bool) map[string]any {
		for _, p := range d["panels"].([]any) {
			if p := p.(map[string]any); pred(p) {
				return p
			}
		}
		t.Fatal("no panel matches")
		return nil
	}
	firstTarget := func(p map[string]any) map[string]any { return p["targets"].([]any)[0].(map[string]any) }
	exprHas := func(s string) func(map[string]any) bool {
		return func(p map[string]any) bool {
			ts, _ := p["targets"].([]any)
			return len(ts) > 0 && strings.Contains(firstTarget(p)["expr"].(string), s)
		}
	}
	tests := []struct {
		name   string
		mutate func(d map[string]any)
		want   string
	}{
		{"editable true", func(d map[string]any) { d["editable"] = true }, "uneditable-dashboard-rule"},
		{"editable absent", func(d map[string]any) { delete(d, "editable") }, "uneditable-dashboard-rule"},
		{"job label lower case", func(d map[string]any) {
			for _, v := range d["templating"].(map[string]any)["list"].([]any) {
				if v := v.(map[string]any); v["name"] == "job" {
					v["label"] = "job"
				}
			}
		}, "template-job-rule"},
		{"histogram without exemplars", func(d map[string]any) {
			delete(firstTarget(panelWhere(d, exprHas("registrar_backend_request_duration_seconds_bucket"))), "exemplar")
		}, "without exemplars"},
		{"invocation latency without exemplars", func(d map[string]any) {
			firstTarget(panelWhere(d, exprHas("registrar_invocation_duration_seconds_bucket")))["exemplar"] = false
		}, "without exemplars"},
		{"counter without rate", func(d map[string]any) {
			firstTarget(panelWhere(d, exprHas("registrar_backend_request_errors_total")))["expr"] = `sum by (kind) (registrar_backend_request_errors_total{job=~"$job",instance=~"$instance"})`
		}, "target-counter-agg-rule"},
		{"no red threshold where normal is zero", func(d map[string]any) {
			p := panelWhere(d, func(p map[string]any) bool { return p["title"] == "Backend errors by kind" })
			p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["thresholds"] = map[string]any{"mode": "absolute", "steps": []any{map[string]any{"color": "green", "value": nil}}}
		}, "no red threshold"},
		{"per-minute panel in short", func(d map[string]any) {
			p := panelWhere(d, exprHas("60 *"))
			p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unit"] = "short"
		}, "per-minute expression"},
		{"stat summed across instances", func(d map[string]any) {
			p := panelWhere(d, func(p map[string]any) bool { return p["type"] == "stat" })
			firstTarget(p)["expr"] = `sum(increase(registrar_limited_admission_total{job=~"$job",instance=~"$instance"}[$__range]))`
		}, "drops the instance label"},
		{"stat with only the sum of the instances", func(d map[string]any) {
			p := panelWhere(d, func(p map[string]any) bool { return p["title"] == "Admission throttles (range)" })
			p["targets"] = p["targets"].([]any)[1:]
		}, "a stat panel shows one value per instance beside their sum"},
		{"audit store row not repeated", func(d map[string]any) {
			delete(panelWhere(d, func(p map[string]any) bool {
				return p["type"] == "row" && strings.HasPrefix(p["title"].(string), "Audit store")
			}), "repeat")
		}, "one audit store row per daemon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			tt.mutate(d)
			mutated, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			probs := linterProblems(t, mutated)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("a scratch copy with %s: problems %q, want one containing %q", tt.name, probs, tt.want)
			}
		})
	}
}
