package docs

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the main module's path: the package table names packages
// relative to it.
const modulePath = "github.com/registrar-otel/registrar-otel"

// packageRowRe is one row of the package table of architecture.md:
// | `path` | layer | kind | what it holds |
var packageRowRe = regexp.MustCompile("^\\|\\s*`([a-z0-9/_.-]+)`\\s*\\|\\s*([0-9]+)\\s*\\|")

// packageTable reads the package table of docs/<lang>/architecture.md:
// each package's layer, and the packages in the page's order.
func packageTable(t *testing.T, lang string) (layers map[string]int, order []string) {
	t.Helper()
	p := loadPage(t, lang, "architecture.md")
	layers = map[string]int{}
	for _, line := range strings.Split(p.raw, "\n") {
		m := packageRowRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		layer, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatalf("%s: package %s: layer %q is not a number", p.path, m[1], m[2])
		}
		if _, dup := layers[m[1]]; dup {
			t.Errorf("%s: package %s has two rows", p.path, m[1])
		}
		layers[m[1]] = layer
		order = append(order, m[1])
	}
	if len(order) == 0 {
		t.Fatalf("%s has no package table", p.path)
	}
	return layers, order
}

// treePackage is one package of `go list ./...`, with its imports inside
// the module, both relative to the module path.
type treePackage struct {
	path    string
	imports []string
}

// treePackages lists the main module's packages (go list ./... from the
// module root: the bench module is a module of its own and not listed).
func treePackages(t *testing.T) []treePackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command: cannot list the tree's packages")
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list ./...: %v\n%s", err, stderr)
	}
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	var pkgs []treePackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		path, ok := rel(p.ImportPath)
		if !ok {
			t.Fatalf("go list ./... listed %s, outside %s", p.ImportPath, modulePath)
		}
		tp := treePackage{path: path}
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok {
				tp.imports = append(tp.imports, r)
			}
		}
		pkgs = append(pkgs, tp)
	}
	return pkgs
}

// The package table of the architecture page names exactly the packages of
// the tree, in both languages, in the same order.
func TestArchitecturePageListsEveryPackageOfTheTree(t *testing.T) {
	var tree []string
	for _, p := range treePackages(t) {
		tree = append(tree, p.path)
	}
	slices.Sort(tree)
	var orders [][]string
	for _, lang := range langs {
		layers, order := packageTable(t, lang)
		var page []string
		for p := range layers {
			page = append(page, p)
		}
		slices.Sort(page)
		for _, p := range tree {
			if _, ok := slices.BinarySearch(page, p); !ok {
				t.Errorf("docs/%s/architecture.md: package %s of the tree has no row", lang, p)
			}
		}
		for _, p := range page {
			if _, ok := slices.BinarySearch(tree, p); !ok {
				t.Errorf("docs/%s/architecture.md: row %s names no package of the tree (go list ./...)", lang, p)
			}
		}
		orders = append(orders, order)
	}
	if !slices.Equal(orders[0], orders[1]) {
		t.Errorf("the package tables differ: en %v, ko %v", orders[0], orders[1])
	}
}

// Every import inside the module goes from a higher layer to a lower one,
// as the page states, and each package's layer is exactly one more than
// the highest layer it imports (0 for none), so the column is derived from
// the import graph and not guessed.
func TestArchitecturePageLayersFollowTheImports(t *testing.T) {
	pkgs := treePackages(t)
	for _, lang := range langs {
		layers, _ := packageTable(t, lang)
		for _, p := range pkgs {
			own, ok := layers[p.path]
			if !ok {
				continue // reported by TestArchitecturePageListsEveryPackageOfTheTree
			}
			want := 0
			var up []string
			for _, imp := range p.imports {
				l, ok := layers[imp]
				if !ok {
					continue
				}
				want = max(want, l+1)
				if l >= own {
					up = append(up, fmt.Sprintf("%s (layer %d)", imp, l))
				}
			}
			if len(up) > 0 {
				t.Errorf("docs/%s/architecture.md: %s is at layer %d but imports %s", lang, p.path, own, strings.Join(up, ", "))
			}
			if own != want {
				t.Errorf("docs/%s/architecture.md: %s is at layer %d, want %d (one above its highest import)", lang, p.path, own, want)
			}
		}
	}
}
