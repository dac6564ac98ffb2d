package dashboards

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// yamlLines returns a YAML file's lines without comments and blank lines,
// trimmed; the provisioning files are flat enough that the keys this test
// checks are recognisable line by line (the module has no YAML parser).
func yamlLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.ContainsRune(l, '\t') {
			t.Errorf("%s: a tab in %q (YAML indents with spaces)", path, l)
		}
		out = append(out, strings.TrimPrefix(l, "- "))
	}
	return out
}

// wantLines reports each pattern in want that matches no line of path's
// lines.
func wantLines(t *testing.T, path string, lines []string, want ...string) {
	t.Helper()
	for _, re := range want {
		if !hasLine(lines, re) {
			t.Errorf("%s: no line matching %q", path, re)
		}
	}
}

func hasLine(lines []string, re string) bool {
	r := regexp.MustCompile(`^` + re + `$`)
	for _, l := range lines {
		if r.MatchString(l) {
			return true
		}
	}
	return false
}

// The data source file provisions a Prometheus data source whose exemplars
// link to the tracing data source named by a variable, on the label the
// daemon's exemplars carry (trace_id, TestOpenMetricsScrapeCarriesTheSpansTraceIDAsExemplar).
func TestProvisionedDataSourceLinksExemplarsToTraces(t *testing.T) {
	lines := yamlLines(t, "provisioning/datasources.yaml")
	wantLines(t, "provisioning/datasources.yaml", lines,
		`apiVersion: 1`,
		`datasources:`,
		`type: prometheus`,
		`url: \$\{PROMETHEUS_URL\}`,
		`exemplarTraceIdDestinations:`,
		`name: trace_id`,
		`datasourceUid: \$\{TRACING_DATASOURCE_UID\}`,
	)
	// The trace id label and the destination belong to one entry.
	for i, l := range lines {
		if l == "name: trace_id" && (i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "datasourceUid: ")) {
			t.Errorf("provisioning/datasources.yaml: name: trace_id is not followed by its datasourceUid")
		}
	}
}

// The dashboard provider loads files, and like the dashboard itself keeps
// the UI from changing them.
func TestProvisionedDashboardProviderIsReadOnly(t *testing.T) {
	lines := yamlLines(t, "provisioning/dashboards.yaml")
	wantLines(t, "provisioning/dashboards.yaml", lines,
		`apiVersion: 1`,
		`providers:`,
		`type: file`,
		`allowUiUpdates: false`,
		`disableDeletion: true`,
		`path: /\S+`,
	)
}
