package main

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The refusals serve's start can make (exit 2), as the source shows them.
// Each kind is found mechanically, so that a new one fails
// TestEveryStartRefusalIsCheckedOrListed until it has a row:
//
//   - refusalServe: serve's own exit-2 returns (runServe, serveExit in
//     serve.go), each named by the call whose failure it answers;
//   - refusalStep: the daemon's start steps that refuse: every setup(...)
//     call and &SetupError{...} literal of daemon/*.go, named by the words
//     its error starts with (its fmt.Errorf format up to the first
//     " (" or ":"), else by the call whose error it passes on;
//   - refusalCause: what makes a step's failure a refusal when the cause
//     decides (setup(err, false)): each target of daemon's permanentCause;
//   - refusalTelemetry: each *config.KeyError telemetry builds (a
//     KeyError literal, a SecretKeyError call), named by its function and
//     the first words of its rule: the refusals of the step "daemon:
//     telemetry", and of the metrics listener's.
const (
	refusalServe     = "serve"
	refusalStep      = "step"
	refusalCause     = "cause"
	refusalTelemetry = "telemetry"
)

// startRefusal is a row of the table: one refusal, and either the test
// that shows config check making it too (checkedBy: a test function of
// this package, or "telemetryRefusals/<case>" for a case of that table),
// or why only a start can see it (onlyAtStart).
type startRefusal struct {
	kind, name  string
	checkedBy   string
	onlyAtStart string
}

// startRefusals is the table. Keep it true: a row's test must show config
// check reporting that refusal (exit 2, or a warning that --strict makes
// an error where a running daemon may hold what serve needs), and a
// reason must say why no check before the start can know.
var startRefusals = []startRefusal{
	// serve's own exit-2 returns.
	{refusalServe, "parseFlags", "", "serve's own flags: a usage error of the command line, not of the configuration (config check answers its own flags the same way)"},
	{refusalServe, "config.ParseLogLevel", "", "serve --log-level's value, a flag of serve's command line that config check does not take"},
	{refusalServe, "newLogger", "", "serve --log-format's value, a flag of serve's command line that config check does not take"},
	{refusalServe, "hardenProcess", "", "making the serving process undumpable and its core size 0 (prctl, setrlimit) is done to the process that serves; only it can fail"},
	{refusalServe, "config.Load", "TestConfigCheckPrintsEveryErrorAndExits2", ""},
	{refusalServe, "daemon.IsSetupError", "", "not a refusal of its own: the daemon's start steps below, each listed"},

	// The daemon's start steps.
	{refusalStep, "daemon: telemetry", "TestConfigCheckRefusesWhatTelemetryRefusesAtStart", ""},
	{refusalStep, "daemon: state directory", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalStep, "daemon: audit sealing key", "TestConfigCheckRefusesASealingKeyServeWouldRefuse", ""},
	{refusalStep, "daemon: audit store", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalStep, "d.recoverEvidence", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalStep, "daemon: openbao backend", "TestConfigCheckVerifiesTheOpenBaoTokenFileMode", ""},
	{refusalStep, "daemon: openbao backend (openbao.address", "", "openbao.New refuses only an empty address or token, or an address that is not an http(s) URL, which config.Load and the token's check (config check) refuse first; it contacts no server at start"},
	{refusalStep, "daemon: embedded backend", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalStep, "daemon: subordinate uids", "TestConfigCheckReportsASubuidFileServeWouldRefuse", ""},
	{refusalStep, "daemon: unix listener", "TestConfigCheckRefusesASocketGroupTheHostLacks", ""},
	{refusalStep, "daemon: socket directory", "TestConfigCheckAsRootJudgesForTheUnitsUser", ""},
	{refusalStep, "daemon: TLS listener", "TestConfigCheckTLSFiles", ""},
	{refusalStep, "daemon: metrics listener", "TestConfigCheckForeseesTheKeyModeAndATakenPort", ""},
	{refusalStep, "daemon: socket activation", "", "the sockets systemd hands over (LISTEN_FDS) exist only in the process systemd starts; config check says which socket the installed socket unit binds (TestConfigCheckTakesWhatSystemdPreparesFromTheUnit), not what a running socket unit hands over"},

	// What makes a cause-decided step's failure a refusal.
	{refusalCause, "*config.KeyError", "TestConfigCheckRefusesWhatTelemetryRefusesAtStart", ""},
	{refusalCause, "privdir.ErrUnsafe", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "audit.ErrUnsafeStore", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "embedded.ErrUnsafeState", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "server.ErrUnsafeDir", "TestServeAndConfigCheckRefuseAForeignOwnedPrivateDirectory", ""},
	{refusalCause, "server.ErrNotSocket", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "server.ErrSocketInUse", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "server.ErrTLSFiles", "TestConfigCheckTLSFiles", ""},
	{refusalCause, "fs.ErrNotExist", "TestConfigCheckTLSFiles", ""},
	{refusalCause, "fs.ErrPermission", "TestConfigCheckJudgesTheAccessServesUserNeeds", ""},
	{refusalCause, "syscall.EADDRINUSE", "TestConfigCheckForeseesTheKeyModeAndATakenPort", ""},
	{refusalCause, "syscall.EADDRNOTAVAIL", "TestConfigCheckForeseesAnAddressThisHostLacks", ""},
	{refusalCause, "syscall.ENOTDIR", "TestConfigCheckPathsAsServeSeesThem", ""},
	{refusalCause, "syscall.ELOOP", "TestConfigCheckRefusesWhatOpeningAPathWouldFailOn", ""},
	{refusalCause, "syscall.EROFS", "", "a read-only file system shows at the first write. Run as serve's own user, config check sees a read-only mount (access(2) answers EROFS for write access); but judged for another user it reads the mode bits, and under the unit the read-only mounts are those of the service's own mount namespace (ProtectSystem=strict: all but its *Directory= and ReadWritePaths=), which exists only once systemd starts it"},
	{refusalCause, "syscall.ENAMETOOLONG", "TestConfigCheckRefusesWhatOpeningAPathWouldFailOn", ""},
	{refusalCause, "syscall.EISDIR", "TestConfigCheckRefusesWhatOpeningAPathWouldFailOn", ""},

	// telemetry's *config.KeyError, the refusals of "daemon: telemetry".
	{refusalTelemetry, "checkConfig: must be a non-empty string", "", "telemetry.service_name: config.Load refuses the same value first (TestConfigCheckPrintsEveryErrorAndExits2 shows config check printing the load's errors); telemetry keeps the rule for its other callers"},
	{refusalTelemetry, "checkConfig: must be at most 1000000 (every root trace)", "", "telemetry.trace_sample_per_million: config.Load refuses the same value first; telemetry keeps the rule for its other callers"},
	{refusalTelemetry, "planExport: must be \"http/protobuf\" (the only OTLP protocol registrar-otel speaks) or unset", "telemetryRefusals/grpc protocol", ""},
	{refusalTelemetry, "keyError: must be an https:// URL unless its host is a loopback address while ", "telemetryRefusals/headers over http to a remote host", ""},
	{refusalTelemetry, "checkURL: must be an http:// or https:// URL with a host", "telemetryRefusals/endpoint variable that is not a URL", ""},
	{refusalTelemetry, "checkURL: must not carry credentials, a query or a fragment (put credentials in ", "telemetryRefusals/endpoint variable with credentials", ""},
	{refusalTelemetry, "exporterError: cannot be exported to: the OTLP/HTTP ", "telemetryRefusals/http endpoint with a TLS certificate", ""},
	{refusalTelemetry, "rootSampler: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", "telemetryRefusals/unknown sampler", ""},
	{refusalTelemetry, "parseRatioArg: must be a number from 0 to 1 (the SDK's traceidratio argument)", "telemetryRefusals/sampler argument out of range", ""},
	{refusalTelemetry, "Listen: could not be listened on: ", "TestConfigCheckForeseesAnAddressThisHostLacks", ""},
}

// TestEveryStartRefusalIsCheckedOrListed: every refusal serve's start can
// make, found in the source (see the kinds above), has its row; every row
// is one of them; and each row either names a test of this package (or a
// case of telemetryRefusals) that exists, or says why only a start can see
// it.
func TestEveryStartRefusalIsCheckedOrListed(t *testing.T) {
	found := map[string][]string{
		refusalServe:     serveRefusals(t),
		refusalStep:      setupSites(t),
		refusalCause:     permanentCauses(t),
		refusalTelemetry: telemetryKeyErrors(t),
	}
	tests := testFuncs(t)
	rows := map[string]bool{}
	for _, r := range startRefusals {
		id := r.kind + ": " + r.name
		if rows[id] {
			t.Errorf("%s has two rows", id)
		}
		rows[id] = true
		if !slices.Contains(found[r.kind], r.name) {
			t.Errorf("row %q: the source has no such %s refusal (found: %q); remove or rename the row", r.name, r.kind, found[r.kind])
		}
		switch {
		case (r.checkedBy == "") == (r.onlyAtStart == ""):
			t.Errorf("row %s: give either the test showing config check making it, or why only a start can see it", id)
		case strings.HasPrefix(r.checkedBy, "telemetryRefusals/"):
			name := strings.TrimPrefix(r.checkedBy, "telemetryRefusals/")
			if !slices.ContainsFunc(telemetryRefusals, func(c struct {
				name, telemetry string
				environ         []string
				key, want       string
			}) bool {
				return c.name == name
			}) {
				t.Errorf("row %s: telemetryRefusals has no case %q", id, name)
			}
		case r.checkedBy != "" && !tests[r.checkedBy]:
			t.Errorf("row %s: no test %s in this package", id, r.checkedBy)
		}
	}
	for kind, names := range found {
		for _, n := range names {
			if !rows[kind+": "+n] {
				t.Errorf("serve's start can refuse (%s) %q, which the table lacks: add a row naming the config check test that shows it, or why only a start can see it", kind, n)
			}
		}
	}
}

// parseDir parses the non-test Go files of dir (relative to the module
// root).
func parseDir(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

func exprText(fset *token.FileSet, e ast.Node) string {
	var b strings.Builder
	printer.Fprint(&b, fset, e)
	return b.String()
}

// firstCall is the function of the first call in n, as written
// ("config.Load", "d.recoverEvidence"), or "".
func firstCall(fset *token.FileSet, n ast.Node) string {
	name := ""
	ast.Inspect(n, func(m ast.Node) bool {
		if c, ok := m.(*ast.CallExpr); ok && name == "" {
			name = exprText(fset, c.Fun)
			return false
		}
		return name == ""
	})
	return name
}

// withParents walks f calling visit with each node and its ancestors
// (innermost last).
func withParents(f ast.Node, visit func(n ast.Node, parents []ast.Node)) {
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		visit(n, stack)
		stack = append(stack, n)
		return true
	})
}

// answeredCall names the call whose failure the statement at parents'
// end answers: the innermost enclosing if's init or condition call, else
// the call of the statement before that if.
func answeredCall(fset *token.FileSet, parents []ast.Node) string {
	for i := len(parents) - 1; i >= 0; i-- {
		ifs, ok := parents[i].(*ast.IfStmt)
		if !ok {
			continue
		}
		if ifs.Init != nil {
			return firstCall(fset, ifs.Init)
		}
		if c := firstCall(fset, ifs.Cond); c != "" {
			return c
		}
		if i > 0 {
			if block, ok := parents[i-1].(*ast.BlockStmt); ok {
				for j, s := range block.List {
					if s == ifs && j > 0 {
						return firstCall(fset, block.List[j-1])
					}
				}
			}
		}
		return ""
	}
	return ""
}

// serveRefusals finds serve's exit-2 returns in runServe and serveExit.
func serveRefusals(t *testing.T) []string {
	fset, files := parseDir(t, "cmd/registrar-otel")
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || (fn.Name.Name != "runServe" && fn.Name.Name != "serveExit") {
				continue
			}
			withParents(fn.Body, func(n ast.Node, parents []ast.Node) {
				ret, ok := n.(*ast.ReturnStmt)
				if !ok || len(ret.Results) != 1 {
					return
				}
				switch r := exprText(fset, ret.Results[0]); {
				case r == "exitUsage", r == "code", strings.HasPrefix(r, "usageError("):
					out = append(out, answeredCall(fset, parents))
				}
			})
		}
	}
	return out
}

// setupSites finds the daemon's start steps that refuse.
func setupSites(t *testing.T) []string {
	fset, files := parseDir(t, "daemon")
	var out []string
	name := func(arg ast.Node, parents []ast.Node) string {
		format := ""
		ast.Inspect(arg, func(m ast.Node) bool {
			if c, ok := m.(*ast.CallExpr); ok && format == "" && exprText(fset, c.Fun) == "fmt.Errorf" {
				if lit, ok := c.Args[0].(*ast.BasicLit); ok {
					format, _ = strconv.Unquote(lit.Value)
				}
			}
			return format == ""
		})
		if format == "" {
			return answeredCall(fset, parents)
		}
		cut := len(format)
		if i := strings.Index(format, " ("); i >= 0 {
			cut = i
		}
		if i := strings.Index(format[len("daemon: "):], ":"); strings.HasPrefix(format, "daemon: ") && i >= 0 && len("daemon: ")+i < cut {
			cut = len("daemon: ") + i
		}
		if strings.HasPrefix(format[cut:], " (openbao.address") {
			cut += len(" (openbao.address") // the backend's second step
		}
		return format[:cut]
	}
	for _, f := range files {
		withParents(f, func(n ast.Node, parents []ast.Node) {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "setup" && len(n.Args) == 2 {
					out = append(out, name(n.Args[0], parents))
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "SetupError" && !inFunc(parents, "setup") {
					out = append(out, name(n, parents))
				}
			}
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// inFunc reports whether parents are inside the function named name.
func inFunc(parents []ast.Node, name string) bool {
	for _, p := range parents {
		if fn, ok := p.(*ast.FuncDecl); ok && fn.Name.Name == name {
			return true
		}
	}
	return false
}

// permanentCauses finds the targets of daemon's permanentCause.
func permanentCauses(t *testing.T) []string {
	fset, files := parseDir(t, "daemon")
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "permanentCause" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.IndexExpr: // errors.AsType[*config.KeyError]
					out = append(out, exprText(fset, n.Index))
				case *ast.CompositeLit:
					for _, e := range n.Elts {
						out = append(out, exprText(fset, e))
					}
				}
				return true
			})
		}
	}
	if len(out) == 0 {
		t.Fatal("daemon has no permanentCause with a list of targets: update this test to where the causes are kept")
	}
	return out
}

// telemetryKeyErrors finds the *config.KeyError telemetry builds.
func telemetryKeyErrors(t *testing.T) []string {
	fset, files := parseDir(t, "telemetry")
	var out []string
	ruleWords := func(e ast.Expr) string {
		words := ""
		ast.Inspect(e, func(m ast.Node) bool {
			if lit, ok := m.(*ast.BasicLit); ok && lit.Kind == token.STRING && words == "" {
				words, _ = strconv.Unquote(lit.Value)
			}
			return words == ""
		})
		return words
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if exprText(fset, n.Type) != "config.KeyError" {
						return true
					}
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && exprText(fset, kv.Key) == "Rule" {
							out = append(out, fn.Name.Name+": "+ruleWords(kv.Value))
						}
					}
				case *ast.CallExpr:
					if exprText(fset, n.Fun) == "config.SecretKeyError" && len(n.Args) == 3 {
						out = append(out, fn.Name.Name+": "+ruleWords(n.Args[2]))
					}
				}
				return true
			})
		}
	}
	return out
}

// testFuncs are the Test functions of this package.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	paths, _ := filepath.Glob("*_test.go")
	out := map[string]bool{}
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fn.Name.Name, "Test") {
				out[fn.Name.Name] = true
			}
		}
	}
	return out
}
