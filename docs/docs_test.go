package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	gotoml "github.com/pelletier/go-toml/v2"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// langs are the language trees under docs/, the default first.
var langs = []string{"en", "ko"}

// requiredPages are the pages every language must have.
var requiredPages = []string{
	"index.md", "configuration.md", "operations.md", "metrics.md", "audit.md", "wire.md", "design.md",
	"commands.md",
}

// heading is one markdown heading outside a code block.
type heading struct {
	line   int
	level  int
	text   string
	anchor string // the explicit {#anchor}, "" when missing
}

// codeBlock is one fenced code block.
type codeBlock struct {
	line int
	info string // the info string after the opening fence ("toml", "sh", "")
	body string
}

// page is one parsed markdown file.
type page struct {
	path     string // relative to docs/, slash-separated: "en/metrics.md"
	raw      string
	headings []heading
	blocks   []codeBlock
}

var (
	headingRe = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*$`)
	anchorRe  = regexp.MustCompile(`\s*\{#([^}\s]+)\}$`)
	anchorID  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// parsePage splits a markdown file into headings and fenced code blocks.
// A fence is a line whose first non-blank characters are ``` (or ~~~);
// headings inside fences are code, not headings.
func parsePage(t *testing.T, rel string) *page {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	p := &page{path: rel, raw: string(raw)}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		inFence bool
		fence   string
		cur     codeBlock
		body    strings.Builder
		n       int
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				inFence = false
				cur.body = body.String()
				p.blocks = append(p.blocks, cur)
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for len(fence) < len(trimmed) && trimmed[len(fence)] == fence[0] {
				fence += fence[:1]
			}
			inFence = true
			cur = codeBlock{line: n, info: strings.TrimSpace(trimmed[len(fence):])}
			body.Reset()
			continue
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			h := heading{line: n, level: len(m[1]), text: m[2]}
			if a := anchorRe.FindStringSubmatch(m[2]); a != nil {
				h.anchor = a[1]
				h.text = strings.TrimSpace(strings.TrimSuffix(m[2], a[0]))
			}
			p.headings = append(p.headings, h)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %s: %v", rel, err)
	}
	if inFence {
		t.Errorf("%s:%d: code block is never closed", rel, cur.line)
	}
	return p
}

// treeFiles lists every file under docs/<lang>/, slash-separated and
// relative to that directory.
func treeFiles(t *testing.T, lang string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(lang, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(lang, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatalf("walk docs/%s: %v", lang, err)
	}
	slices.Sort(files)
	return files
}

// markdownPages returns the .md files of a language tree.
func markdownPages(t *testing.T, lang string) []string {
	t.Helper()
	var out []string
	for _, f := range treeFiles(t, lang) {
		if strings.HasSuffix(f, ".md") {
			out = append(out, f)
		}
	}
	return out
}

func loadPage(t *testing.T, lang, name string) *page {
	t.Helper()
	return parsePage(t, lang+"/"+name)
}

// pagesNamed is the page docs/<lang>/name in each language, in langs order.
func pagesNamed(t *testing.T, name string) []*page {
	t.Helper()
	var ps []*page
	for _, lang := range langs {
		ps = append(ps, loadPage(t, lang, name))
	}
	return ps
}

// nonEmpty returns list, failing the test at once when it is empty: a
// check over the names a package lists must not pass vacuously.
func nonEmpty[T any](t *testing.T, what string, list []T) []T {
	t.Helper()
	if len(list) == 0 {
		t.Fatalf("%s is empty", what)
	}
	return list
}

func TestBothLanguagesHaveTheSamePages(t *testing.T) {
	en, ko := treeFiles(t, "en"), treeFiles(t, "ko")
	if !slices.Equal(en, ko) {
		for _, f := range en {
			if !slices.Contains(ko, f) {
				t.Errorf("docs/en/%s has no docs/ko/%s", f, f)
			}
		}
		for _, f := range ko {
			if !slices.Contains(en, f) {
				t.Errorf("docs/ko/%s has no docs/en/%s", f, f)
			}
		}
	}
	for _, lang := range langs {
		for _, p := range requiredPages {
			if _, err := os.Stat(filepath.Join(lang, p)); err != nil {
				t.Errorf("docs/%s/%s is missing: %v", lang, p, err)
			}
		}
	}
}

func TestEveryHeadingHasAnExplicitAnchor(t *testing.T) {
	for _, lang := range langs {
		for _, name := range markdownPages(t, lang) {
			p := loadPage(t, lang, name)
			if len(p.headings) == 0 {
				t.Errorf("%s has no heading", p.path)
			}
			seen := map[string]int{}
			for _, h := range p.headings {
				switch {
				case h.anchor == "":
					t.Errorf("%s:%d: heading %q has no explicit {#anchor}", p.path, h.line, h.text)
				case !anchorID.MatchString(h.anchor):
					t.Errorf("%s:%d: anchor %q is not lowercase [a-z0-9-]", p.path, h.line, h.anchor)
				case seen[h.anchor] != 0:
					t.Errorf("%s:%d: anchor %q already used on line %d", p.path, h.line, h.anchor, seen[h.anchor])
				}
				seen[h.anchor] = h.line
			}
		}
	}
}

func TestPagePairsHaveTheSameAnchorsInOrder(t *testing.T) {
	for _, name := range markdownPages(t, "en") {
		if _, err := os.Stat(filepath.Join("ko", name)); err != nil {
			continue // reported by TestBothLanguagesHaveTheSamePages
		}
		en, ko := loadPage(t, "en", name), loadPage(t, "ko", name)
		key := func(p *page) []string {
			var out []string
			for _, h := range p.headings {
				out = append(out, fmt.Sprintf("h%d #%s", h.level, h.anchor))
			}
			return out
		}
		ek, kk := key(en), key(ko)
		if slices.Equal(ek, kk) {
			continue
		}
		for i := 0; i < max(len(ek), len(kk)); i++ {
			var e, k string
			if i < len(ek) {
				e = ek[i]
			}
			if i < len(kk) {
				k = kk[i]
			}
			if e != k {
				t.Errorf("%s: heading %d is %q in en but %q in ko", name, i+1, e, k)
				break
			}
		}
	}
}

// Code blocks (commands, configuration, output, payloads) are never
// translated: the Korean page must show exactly what the English one shows.
func TestPagePairsHaveTheSameCodeBlocks(t *testing.T) {
	for _, name := range markdownPages(t, "en") {
		if _, err := os.Stat(filepath.Join("ko", name)); err != nil {
			continue
		}
		en, ko := loadPage(t, "en", name), loadPage(t, "ko", name)
		if len(en.blocks) != len(ko.blocks) {
			t.Errorf("%s: %d code blocks in en, %d in ko", name, len(en.blocks), len(ko.blocks))
			continue
		}
		for i := range en.blocks {
			e, k := en.blocks[i], ko.blocks[i]
			if e.info != k.info || strings.TrimSpace(e.body) != strings.TrimSpace(k.body) {
				t.Errorf("%s: code block %d differs (en line %d, ko line %d)", name, i+1, e.line, k.line)
			}
		}
	}
}

// anchorsOf returns the explicit anchors of a page.
func anchorsOf(p *page) map[string]bool {
	out := map[string]bool{}
	for _, h := range p.headings {
		if h.anchor != "" {
			out[h.anchor] = true
		}
	}
	return out
}

// Relative links between pages (and to shipped files) must resolve, anchors
// included, in both languages.
func TestRelativeLinksResolve(t *testing.T) {
	for _, lang := range langs {
		for _, name := range markdownPages(t, lang) {
			p := loadPage(t, lang, name)
			// Links inside code blocks are code, not links.
			text := p.raw
			for _, b := range p.blocks {
				text = strings.Replace(text, b.body, "", 1)
			}
			for _, m := range linkRe.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				resolved := name
				if file != "" {
					resolved = path.Join(path.Dir(name), file)
				}
				if _, err := os.Stat(filepath.Join(lang, filepath.FromSlash(resolved))); err != nil {
					t.Errorf("%s: link %q: %s does not exist", p.path, target, resolved)
					continue
				}
				if frag != "" && strings.HasSuffix(resolved, ".md") {
					if !anchorsOf(loadPage(t, lang, resolved))[frag] {
						t.Errorf("%s: link %q: %s has no anchor #%s", p.path, target, resolved, frag)
					}
				}
			}
		}
	}
}

// mkdocsConfig is what the test reads from a mkdocs configuration: enough
// to check the site shape without a YAML dependency (the files are plain
// block YAML).
type mkdocsConfig struct {
	raw     string
	navRefs []string
}

var navRefRe = regexp.MustCompile(`^\s*-\s+(?:[^:]+:\s+)?([A-Za-z0-9_./-]+\.md)\s*$`)

func readMkdocs(t *testing.T, name string) mkdocsConfig {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	cfg := mkdocsConfig{raw: string(raw)}
	inNav := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "-") {
			inNav = strings.HasPrefix(line, "nav:")
			continue
		}
		if inNav {
			if m := navRefRe.FindStringSubmatch(line); m != nil {
				cfg.navRefs = append(cfg.navRefs, m[1])
			}
		}
	}
	return cfg
}

// The site is two mkdocs builds that Debian's mkdocs 1.4 and
// mkdocs-material 8.2 can run without plugins: mkdocs.yml (English, the
// site root) and mkdocs.ko.yml (Korean, under ko/), which inherits the
// first. Each lists every page of its tree, in the same order, and both
// carry the language switch. `make docs` builds them with --strict.
func TestMkdocsListsBothLanguagesAndEveryPage(t *testing.T) {
	sites := []struct {
		file, lang string
		want       []*regexp.Regexp
	}{
		{"mkdocs.yml", "en", []*regexp.Regexp{
			regexp.MustCompile(`(?m)^docs_dir:\s*docs/en\s*$`),
			regexp.MustCompile(`(?m)^site_dir:\s*site\s*$`),
			regexp.MustCompile(`(?m)^\s+name:\s*material\s*$`),
			regexp.MustCompile(`(?m)^\s+language:\s*en\s*$`),
			regexp.MustCompile(`(?m)^\s+-\s+attr_list\s*$`),
			regexp.MustCompile(`(?m)^\s+-\s+admonition\s*$`),
			regexp.MustCompile(`(?m)^\s+-\s+tables\s*$`),
			regexp.MustCompile(`(?m)^\s+-\s+toc:\s*$`),
			regexp.MustCompile(`(?m)^\s+permalink:\s*true\s*$`),
			regexp.MustCompile(`(?m)^\s+link:\s*ko/\s*$`),
		}},
		{"mkdocs.ko.yml", "ko", []*regexp.Regexp{
			regexp.MustCompile(`(?m)^INHERIT:\s*mkdocs.yml\s*$`),
			regexp.MustCompile(`(?m)^docs_dir:\s*docs/ko\s*$`),
			regexp.MustCompile(`(?m)^site_dir:\s*site/ko\s*$`),
			regexp.MustCompile(`(?m)^\s+language:\s*kr\s*$`), // Material 8.2's code for Korean
		}},
	}
	var navs [][]string
	for _, site := range sites {
		cfg := readMkdocs(t, site.file)
		for _, want := range append(site.want,
			regexp.MustCompile(`(?m)^\s+-\s+name:\s*English\s*$`),
			regexp.MustCompile(`(?m)^\s+-\s+name:\s*한국어\s*$`),
		) {
			if !want.MatchString(cfg.raw) {
				t.Errorf("%s does not match %s", site.file, want)
			}
		}
		// Only plugins Debian ships: the built-in search.
		if m := regexp.MustCompile(`(?m)^\s+-\s+(i18n|static-i18n|mkdocs-static-i18n)\b`).FindString(cfg.raw); m != "" {
			t.Errorf("%s names a plugin Debian does not ship: %s", site.file, m)
		}
		if strings.Contains(cfg.raw, "exclude_docs") {
			t.Errorf("%s uses exclude_docs, which needs mkdocs ≥ 1.5", site.file)
		}
		if strings.Contains(cfg.raw, "\t") {
			t.Errorf("%s contains a tab; YAML indentation must be spaces", site.file)
		}
		if len(cfg.navRefs) == 0 {
			t.Fatalf("%s has no nav pages", site.file)
		}
		for _, ref := range cfg.navRefs {
			if _, err := os.Stat(filepath.Join(site.lang, filepath.FromSlash(ref))); err != nil {
				t.Errorf("%s: nav page %s does not exist in docs/%s: %v", site.file, ref, site.lang, err)
			}
		}
		for _, name := range markdownPages(t, site.lang) {
			if !slices.Contains(cfg.navRefs, name) {
				t.Errorf("docs/%s/%s is not in the %s nav", site.lang, name, site.file)
			}
		}
		navs = append(navs, cfg.navRefs)
	}
	if !slices.Equal(navs[0], navs[1]) {
		t.Errorf("the navs differ: en %v, ko %v", navs[0], navs[1])
	}
}

func TestEveryConfigKeyIsDocumented(t *testing.T) {
	keys := nonEmpty(t, "config.Keys()", config.Keys())
	for _, p := range pagesNamed(t, "configuration.md") {
		for _, k := range keys {
			if strings.Contains(k, "<name>") {
				// The component table: registrar.components.<name>.multiplicity.
				if !strings.Contains(p.raw, "registrar.components.") || !strings.Contains(p.raw, "multiplicity") || !strings.Contains(p.raw, k) {
					t.Errorf("%s does not document %s", p.path, k)
				}
				continue
			}
			if !strings.Contains(p.raw, "`"+k+"`") {
				t.Errorf("%s does not document `%s`", p.path, k)
			}
		}
	}
}

// Every ```toml block in any page is a configuration an operator may copy:
// it must load as a whole file.
func TestEveryTOMLBlockLoads(t *testing.T) {
	dir := t.TempDir()
	found := 0
	for _, lang := range langs {
		for _, name := range markdownPages(t, lang) {
			p := loadPage(t, lang, name)
			for i, b := range p.blocks {
				if b.info != "toml" {
					continue
				}
				found++
				f := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.toml", lang, strings.TrimSuffix(name, ".md"), i))
				if err := os.WriteFile(f, []byte(b.body), 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := config.Load(f, nil, nil); err != nil {
					t.Errorf("%s:%d: toml block does not load:\n%v", p.path, b.line, err)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no ```toml block in any page")
	}
}

// tomlLeafKeys returns the dotted leaf keys of a TOML document, with every
// component name and caller policy name replaced by <name>.
func tomlLeafKeys(t *testing.T, body string) map[string]bool {
	t.Helper()
	var doc map[string]any
	if err := gotoml.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("parse toml: %v", err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if prefix == "registrar.components." || prefix == "registrar.callers." {
				key = prefix + "<name>"
			}
			if sub, ok := v.(map[string]any); ok {
				walk(key+".", sub)
				continue
			}
			out[key] = true
		}
	}
	walk("", doc)
	return out
}

// configuration.md shows at least one complete example: a toml block that
// sets every key config.Keys() lists.
func TestConfigurationHasACompleteExample(t *testing.T) {
	for _, p := range pagesNamed(t, "configuration.md") {
		best, bestMissing := -1, []string(nil)
		for i, b := range p.blocks {
			if b.info != "toml" {
				continue
			}
			have := tomlLeafKeys(t, b.body)
			var missing []string
			for _, k := range config.Keys() {
				if !have[k] {
					missing = append(missing, k)
				}
			}
			if best == -1 || len(missing) < len(bestMissing) {
				best, bestMissing = i, missing
			}
		}
		if best == -1 {
			t.Errorf("%s has no ```toml block", p.path)
			continue
		}
		if len(bestMissing) > 0 {
			t.Errorf("%s: no toml block sets every key; the most complete one misses %v", p.path, bestMissing)
		}
	}
}

// The shipped example file is the page's complete example, byte for byte.
func TestShippedExampleMatchesThePage(t *testing.T) {
	for _, lang := range langs {
		file, err := os.ReadFile(filepath.Join(lang, "examples", "registrar.toml"))
		if err != nil {
			t.Errorf("docs/%s/examples/registrar.toml: %v", lang, err)
			continue
		}
		if _, err := config.Load(filepath.Join(lang, "examples", "registrar.toml"), nil, nil); err != nil {
			t.Errorf("docs/%s/examples/registrar.toml does not load:\n%v", lang, err)
		}
		p := loadPage(t, lang, "configuration.md")
		found := false
		for _, b := range p.blocks {
			if b.info == "toml" && b.body == string(file) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no toml block equals examples/registrar.toml", p.path)
		}
	}
}

// specMessages are the configuration error messages whose wording the spec
// fixes (spec/config.md), plus every zero rule of the limiter and evidence
// keys.
var specMessages = []string{
	"registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint",
	"registrar.rate_limit_admission_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently",
	"registrar.rate_limit_predecision_refusal_burst must be an unsigned integer, got -3",
	"registrar.rate_limit_predecision_refusal_burst must be greater than 0; a zero burst throttles the first legitimate mint",
	"registrar.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently",
	"registrar.rate_limit_coalesce_window_seconds must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing",
}

// fixtureMessages returns every message of config/testdata/invalid_*.err but
// the syntax error, whose text names the fixture's own path.
func fixtureMessages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "config", "testdata", "invalid_*.err"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no config/testdata/invalid_*.err fixture")
	}
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "testdata/") {
				continue
			}
			if !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
	}
	return out
}

func TestConfigErrorMessagesAreQuotedExactly(t *testing.T) {
	msgs := append(slices.Clone(specMessages), fixtureMessages(t)...)
	for _, p := range pagesNamed(t, "configuration.md") {
		for _, m := range msgs {
			if !strings.Contains(p.raw, m) {
				t.Errorf("%s does not quote the message:\n  %s", p.path, m)
			}
		}
	}
}

var (
	alertRe    = regexp.MustCompile(`(?m)^\s*-\s+alert:\s*(\S+)\s*$`)
	runbookRe  = regexp.MustCompile(`(?m)^\s*runbook_url:\s*"?([^"\s]+)"?\s*$`)
	anchorPart = regexp.MustCompile(`/metrics\.md#([a-z0-9-]+)$`)
)

func TestEveryAlertHasARunbookInBothLanguages(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "dashboards", "alerts.yml"))
	if err != nil {
		t.Fatalf("read dashboards/alerts.yml: %v", err)
	}
	alerts := alertRe.FindAllStringSubmatch(string(raw), -1)
	if len(alerts) == 0 {
		t.Fatal("no alert in dashboards/alerts.yml")
	}
	runbooks := runbookRe.FindAllStringSubmatch(string(raw), -1)
	if len(runbooks) != len(alerts) {
		t.Errorf("dashboards/alerts.yml: %d alerts but %d runbook_url annotations", len(alerts), len(runbooks))
	}
	for i, a := range alerts {
		name := a[1]
		want := strings.ToLower(name)
		if i < len(runbooks) {
			m := anchorPart.FindStringSubmatch(runbooks[i][1])
			if m == nil || m[1] != want {
				t.Errorf("alert %s: runbook_url %q does not end in /metrics.md#%s", name, runbooks[i][1], want)
			}
		}
		for _, p := range pagesNamed(t, "metrics.md") {
			found := false
			for _, h := range p.headings {
				if h.anchor == want {
					found = true
					if !strings.Contains(h.text, name) {
						t.Errorf("%s:%d: heading #%s does not name the alert %s", p.path, h.line, want, name)
					}
				}
			}
			if !found {
				t.Errorf("%s has no heading {#%s} for alert %s", p.path, want, name)
			}
		}
	}
}

func TestEveryWireIdentifierIsDocumented(t *testing.T) {
	ids := nonEmpty(t, "wire.IDs()", wire.IDs())
	for _, p := range pagesNamed(t, "wire.md") {
		for _, id := range ids {
			if !strings.Contains(p.raw, "`"+string(id)+"`") {
				t.Errorf("%s does not document `%s`", p.path, id)
			}
		}
	}
}

// seriesNames reads the exposition's names, histograms folded to their
// base name.
func seriesNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "telemetry", "testdata", "metrics_names.golden"))
	if err != nil {
		t.Fatalf("read the metric names golden: %v", err)
	}
	lines := strings.Fields(string(raw))
	var out []string
	for _, name := range lines {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base, ok := strings.CutSuffix(name, suffix)
			if ok && slices.Contains(lines, base+"_bucket") {
				name = base
				break
			}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func TestEverySeriesIsDocumented(t *testing.T) {
	names := seriesNames(t)
	if !slices.Contains(names, "registrar_outcome_unrecordable_total") {
		names = append(names, "registrar_outcome_unrecordable_total")
	}
	for _, p := range pagesNamed(t, "metrics.md") {
		for _, n := range names {
			if !strings.Contains(p.raw, "`"+n+"`") && !strings.Contains(p.raw, n+"{") {
				t.Errorf("%s does not document the series %s", p.path, n)
			}
		}
	}
}
