package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// callerSeries are the series of the callers' traffic and of the
// limiter's decisions about it. Registrars sharing a caller's budget
// (registrar.instances) see parts of one caller's traffic, so a panel of
// them must show the deployment when All is selected: summed over the
// instances, never one line per instance. (The limiter's entries and cap,
// the open windows and the audit store are each daemon's own resources
// against each daemon's own cap, and stay per instance.)
var callerSeries = []string{
	limitedAdmission, limitedPredecision, shadowLimited,
	"registrar_invocations_total", "registrar_invocation_duration_seconds_bucket", "registrar_invocation_duration_seconds_count",
	"registrar_limiter_overflow_charges_total", "registrar_limiter_reclaimed_entries_total", "registrar_authorization_refusals_total",
}

// aggregationOf matches an aggregation and its grouping clause.
var aggregationOf = regexp.MustCompile(`\b(sum|avg|max|min|count)\b\s*(?:(by|without)\s*\(([^)]*)\))?\s*\(`)

// TestCallerAndLimiterPanelsSumAcrossInstancesWhenAllIsSelected: every
// panel of a caller or limiter series shows their sum over the selected
// instances: each of its queries aggregates, and none keeps the instance
// (by (…, instance, …), or without, which keeps it), except on a stat
// panel the per-instance value beside an "all selected" target that sums
// them (the on-call rule: which daemon differs).
func TestCallerAndLimiterPanelsSumAcrossInstancesWhenAllIsSelected(t *testing.T) {
	panels, _ := allPanels(loadDashboard(t))
	n := 0
	for _, p := range panels {
		summed, perInstance := false, false
		for _, q := range promTargets(t, p) {
			if !slices.ContainsFunc(metricNames(q.Expr), func(s string) bool { return slices.Contains(callerSeries, s) }) {
				continue
			}
			n++
			where := fmt.Sprintf("panel %q target %s", title(p), deref(q.RefId))
			aggs := aggregationOf.FindAllStringSubmatch(q.Expr, -1)
			if len(aggs) == 0 {
				t.Errorf("%s: no aggregation, so one series per instance: %s", where, q.Expr)
			}
			keeps := false
			for _, m := range aggs {
				labels := strings.Fields(strings.ReplaceAll(m[3], ",", " "))
				keeps = keeps || m[2] == "without" || slices.Contains(labels, "instance")
			}
			switch {
			case !keeps:
				summed = true
			case p.Type == "stat" && deref(q.LegendFormat) != allSelected:
				perInstance = true
			default:
				t.Errorf("%s: keeps the instance; with All selected it should sum the registrars: %s", where, q.Expr)
			}
		}
		if perInstance && !summed {
			t.Errorf("panel %q: one value per instance and no %q target summing them", title(p), allSelected)
		}
	}
	if n == 0 {
		t.Fatal("no dashboard query reads a caller or limiter series")
	}
}

// TestThrottlePanelsAddTwoRegistrarsUp evaluates the limited panels'
// queries (a stat panel's "all selected" target) with promtool over two
// registrars' counters, as Grafana runs them with All selected
// ($instance = .+): one series, the sum.
func TestThrottlePanelsAddTwoRegistrarsUp(t *testing.T) {
	promtool(t)
	d := loadDashboard(t)
	panels, _ := allPanels(d)
	want := map[string]string{
		// 60/min on a, 30/min on b: 1.5 a second, 5400 over the
		// hour; refusals 30 and 15 a minute: 0.75 a second.
		"Admission throttles (range)":             "5400",
		"Admission throttles by verb":             "1.5",
		"Admission throttles by policy":           "1.5",
		"Limited pre-derivation refusals by verb": "0.75",
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$job", ".+", "$instance", ".+")
	var rules, tests strings.Builder
	rules.WriteString("groups:\n  - name: two-registrars\n    rules:\n")
	found := map[string]bool{}
	for _, p := range panels {
		v, ok := want[title(p)]
		if !ok {
			continue
		}
		for i, q := range promTargets(t, p) {
			if p.Type == "stat" && deref(q.LegendFormat) != allSelected {
				continue // the per-instance value beside the sum
			}
			found[title(p)] = true
			rec := fmt.Sprintf("panel:%d_%d", len(found), i)
			expr, _ := json.Marshal(vars.Replace(q.Expr))
			fmt.Fprintf(&rules, "      - record: %s\n        expr: %s\n", rec, expr)
			labels := ""
			if strings.Contains(q.Expr, "by (verb)") {
				labels = `{verb="mint"}`
			}
			if strings.Contains(q.Expr, "by (policy)") {
				labels = `{policy="default"}`
			}
			fmt.Fprintf(&tests, "      - expr: %s\n        eval_time: 60m\n        exp_samples:\n          - labels: '%s%s'\n            value: %s\n", rec, rec, labels, v)
		}
	}
	for name := range want {
		if !found[name] {
			t.Errorf("no panel %q", name)
		}
	}
	series := func(metric, instance, per string) string {
		return fmt.Sprintf("      - series: '%s{job=\"registrar\",instance=\"%s\",verb=\"mint\",policy=\"default\"}'\n        values: '0+%sx120'\n", metric, instance, per)
	}
	test := "rule_files:\n  - rules.yml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		series(limitedAdmission, "registrar-a:9464", "60") + series(limitedAdmission, "registrar-b:9464", "30") +
		series(limitedPredecision, "registrar-a:9464", "30") + series(limitedPredecision, "registrar-b:9464", "15") +
		"    promql_expr_test:\n" + tests.String()
	dir := t.TempDir()
	for name, body := range map[string]string{"rules.yml": rules.String(), "test.yml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runPromtool(t, dir, "test", "rules", "test.yml")
}
