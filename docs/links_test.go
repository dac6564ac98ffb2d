package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// installedDocs is where the Debian package installs docs/<lang>/.
const installedDocs = "file:///usr/share/doc/registrar-otel/"

var (
	dashboardURL = regexp.MustCompile(`[a-z]+://[^\s"'<>)]+`)
	// A path to a markdown file in a comment: spec/limiter.md, docs/en/operations.md#two-buckets.
	dashboardMD = regexp.MustCompile(`[A-Za-z0-9_./-]+\.md(?:#[a-z0-9-]+)?`)
)

// resolveDocLink checks a link into the docs (lang/page.md#anchor): the
// page exists and has the anchor. It returns why not, or "".
func resolveDocLink(t *testing.T, rel string) string {
	page, anchor, _ := strings.Cut(rel, "#")
	if _, err := os.Stat(page); err != nil {
		return "no such page docs/" + page
	}
	if anchor == "" {
		return ""
	}
	lang, name, _ := strings.Cut(page, "/")
	for _, h := range loadPage(t, lang, name).headings {
		if h.anchor == anchor {
			return ""
		}
	}
	return "docs/" + page + " has no heading #" + anchor
}

// TestEveryDashboardLinkLeadsSomewhere: every URL in dashboards/ (the
// alerts' runbook_url, the dashboard's links) and every .md path its
// comments cite resolves to a page, and an anchor, the project ships.
func TestEveryDashboardLinkLeadsSomewhere(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join("..", "dashboards"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Grafana's provisioning files hold service addresses (the
		// Prometheus data source), not links for a reader.
		urls := dashboardURL.FindAllString(string(raw), -1)
		if filepath.Base(filepath.Dir(f)) == "provisioning" {
			urls = nil
		}
		for _, u := range urls {
			checked++
			rel, ok := strings.CutPrefix(u, installedDocs)
			if !ok {
				t.Errorf("%s: link %s leads outside the installed docs (%s…)", f, u, installedDocs)
				continue
			}
			if why := resolveDocLink(t, rel); why != "" {
				t.Errorf("%s: link %s leads nowhere: %s", f, u, why)
			}
		}
		for _, ref := range dashboardMD.FindAllString(string(raw), -1) {
			if strings.Contains(ref, "usr/share/doc/") {
				continue // a URL's path, checked above
			}
			checked++
			page, anchor, _ := strings.Cut(ref, "#")
			rel, inDocs := strings.CutPrefix(page, "docs/")
			if !inDocs {
				if _, err := os.Stat(filepath.Join("..", page)); err != nil {
					t.Errorf("%s: cites %s, which the repository does not have", f, ref)
				}
				continue
			}
			if anchor != "" {
				rel += "#" + anchor
			}
			if why := resolveDocLink(t, rel); why != "" {
				t.Errorf("%s: cites %s, which leads nowhere: %s", f, ref, why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no link found in dashboards/")
	}
}
