// Package dashboards holds the operator-facing monitoring artefacts of
// registrar-otel and the tests that keep them honest. It has no Go API: the
// files are the product.
//
//   - registrar-limiter.json is a Grafana dashboard (schemaVersion 39, for
//     Grafana 10.4 and 11; uid "registrar-limiter"). Import it with
//     Dashboards > New > Import > "Upload dashboard JSON file", or provision it
//     from a directory listed in a dashboards provider
//     (/etc/grafana/provisioning/dashboards/*.yaml). It has no __inputs: pick
//     the Prometheus data source in its "datasource" variable, then the job
//     and instances. Rows: Limiter, Evidence, Audit store (repeated per
//     instance), Wire, OpenBao backend; it is not editable in the UI (change
//     the file); every panel carries
//     a description saying what it shows, what normal looks like and what to
//     do. The two limited rates (predecision_refusal and admission) are
//     separate panels and are never added together.
//   - alerts.yml is a Prometheus rule file (group "registrar-otel", six
//     alerts). Add its path to rule_files in prometheus.yml and reload
//     Prometheus; route on the severity label (critical pages, warning opens
//     a ticket). Each alert's runbook_url points at its heading in the
//     operator docs. The comment above each rule explains its threshold and
//     its for: duration.
//   - provisioning/ holds Grafana provisioning files: datasources.yaml (the
//     Prometheus data source with its exemplar -> trace link to the tracing
//     data source $TRACING_DATASOURCE_UID) and dashboards.yaml (a read-only
//     file provider).
//   - alerts_test.yml holds the promtool unit tests of those rules; run them
//     with `cd dashboards && promtool test rules alerts_test.yml`.
//
// The Go tests decode the dashboard strictly with
// github.com/grafana/grafana-foundation-sdk/go and check its structure,
// check that every metric name the dashboard and the rules query is one the
// daemon exposes (telemetry/testdata/metrics_names.golden), and, when
// promtool is on PATH, run promtool check rules, the rule unit tests, and a
// syntax check of every dashboard query.
package dashboards
