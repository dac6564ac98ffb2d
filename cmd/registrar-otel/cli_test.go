package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wantContains reports as an error each of wants that text lacks; what
// names the text in the message.
func wantContains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func runDispatch(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = dispatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every command and subcommand answers -h and --help with a real usage on
// stdout and exit 0.
func TestEveryCommandAnswersHelp(t *testing.T) {
	for _, c := range commands {
		for _, h := range []string{"-h", "--help"} {
			args := append(strings.Fields(c.name), h)
			code, out, errOut := runDispatch(args...)
			if code != exitOK {
				t.Errorf("%v: exit %d, want 0; stderr %q", args, code, errOut)
			}
			if errOut != "" {
				t.Errorf("%v: stderr %q, want nothing", args, errOut)
			}
			for _, want := range []string{"usage: registrar-otel " + c.name + " ", "\nflags:\n", "  -h, --help\n", "\nexamples:\n  registrar-otel " + c.name} {
				if !strings.Contains(out, want) {
					t.Errorf("%v: usage lacks %q:\n%s", args, want, out)
				}
			}
			if strings.Contains(out, "Usage of") {
				t.Errorf("%v: Go's default usage printed:\n%s", args, out)
			}
		}
		// "help X" is "X -h".
		code, out, _ := runDispatch(append([]string{"help"}, strings.Fields(c.name)...)...)
		if code != exitOK || !strings.HasPrefix(out, "usage: registrar-otel "+c.name+" ") {
			t.Errorf("help %s: exit %d, %q", c.name, code, out)
		}
	}
}

// A bad flag exits 2 with the error and a one-line hint to run -h, on
// stderr, and nothing on stdout.
func TestEveryCommandRejectsABadFlagWithAHint(t *testing.T) {
	for _, c := range commands {
		for _, bad := range [][]string{{"--no-such-flag"}, {"-no-such-flag"}, {"stray-argument"}} {
			args := append(strings.Fields(c.name), bad...)
			code, out, errOut := runDispatch(args...)
			if code != exitUsage {
				t.Errorf("%v: exit %d, want 2", args, code)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "registrar-otel "+c.name+": ") ||
				lines[1] != "Run 'registrar-otel "+c.name+" -h' for usage." {
				t.Errorf("%v: stderr %q, want the error and the one-line hint", args, errOut)
			}
			if out != "" {
				t.Errorf("%v: stdout %q, want nothing", args, out)
			}
		}
	}
	for _, verb := range []string{"mint", "deregister"} {
		code, out, errOut := runDispatch(verb, "--host", "h1")
		if code != exitUsage || out != "" || !strings.Contains(errOut, "registrar-otel "+verb+": --service-name, --component required") ||
			!strings.Contains(errOut, "Run 'registrar-otel "+verb+" -h' for usage.") {
			t.Errorf("%s without its identity flags: exit %d, stderr %q", verb, code, errOut)
		}
	}
	code, _, errOut := runDispatch("mint", "--no-such-flag")
	if code != exitUsage || !strings.Contains(errOut, "unknown flag --no-such-flag") {
		t.Errorf("mint --no-such-flag: exit %d, %q", code, errOut)
	}
}

// A group alone, or with -h, lists its subcommands; an unknown
// subcommand exits 2 pointing at the list.
func TestGroupsListTheirSubcommands(t *testing.T) {
	for group := range groups {
		var subs []string
		for _, c := range commands {
			if s, ok := strings.CutPrefix(c.name, group+" "); ok {
				subs = append(subs, s)
			}
		}
		if len(subs) == 0 {
			t.Fatalf("group %s has no subcommand", group)
		}
		// A bare group is a usage error: the list goes to stderr, exit 2.
		if code, out, errOut := runDispatch(group); code != exitUsage || out != "" || !strings.HasPrefix(errOut, "usage: registrar-otel "+group+" <subcommand>") {
			t.Errorf("bare %s: exit %d, stdout %q, stderr %q; want 2 and the list on stderr", group, code, out, errOut)
		}
		for _, args := range [][]string{{group, "-h"}, {group, "--help"}, {"help", group}} {
			code, out, errOut := runDispatch(args...)
			if code != exitOK || errOut != "" || !strings.HasPrefix(out, "usage: registrar-otel "+group+" <subcommand>") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
			for _, s := range subs {
				if !strings.Contains(out, "\n  "+s+" ") {
					t.Errorf("%v: does not list %q:\n%s", args, s, out)
				}
			}
		}
		code, _, errOut := runDispatch(group, "nope")
		if code != exitUsage || !strings.Contains(errOut, `unknown command "`+group+` nope"`) || !strings.Contains(errOut, "Run 'registrar-otel "+group+" -h'") {
			t.Errorf("%s nope: exit %d, %q", group, code, errOut)
		}
	}
}

func TestTopLevel(t *testing.T) {
	// A bare registrar-otel is a usage error: the list goes to stderr, exit 2.
	if code, out, errOut := runDispatch(); code != exitUsage || out != "" || !strings.HasPrefix(errOut, "usage: registrar-otel <command>") {
		t.Errorf("bare: exit %d, stdout %q, stderr %q; want 2 and the list on stderr", code, out, errOut)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, _ := runDispatch(args...)
		if code != exitOK || !strings.HasPrefix(out, "usage: registrar-otel <command>") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("%v: does not list %q", args, c.name)
			}
		}
	}
	for _, args := range [][]string{{"nope"}, {"--bogus"}, {"--version", "extra"}} {
		code, out, errOut := runDispatch(args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "registrar-otel -h") && !strings.Contains(errOut, "version --json") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a hint", args, code, out, errOut)
		}
	}
	code, out, _ := runDispatch("--version")
	code2, out2, _ := runDispatch("version")
	if code != exitOK || code2 != exitOK || out != out2 || !strings.HasPrefix(out, "registrar-otel ") || !strings.Contains(out, "\nrevision: ") || !strings.Contains(out, "\ngo: go") {
		t.Errorf("--version %d %q, version %d %q", code, out, code2, out2)
	}
}

// The one exit-code table of the docs lists exactly the statuses the
// commands use, in both languages, and the command table names every
// command.
func TestDocsExitCodeTableAndCommandsMatchTheBinary(t *testing.T) {
	statuses := []int{exitOK, exitFailure, exitUsage, exitTransport, exitLimited, exitRetryable, exitInterrupt, exitTerminate}
	rowRE := regexp.MustCompile(`(?m)^\| (\d+) \|`)
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "commands.md"))
		if err != nil {
			t.Fatal(err)
		}
		page := string(raw)
		start := strings.Index(page, "{#exit-codes}")
		end := strings.Index(page, "{#progress}")
		if start < 0 || end < start {
			t.Fatalf("docs/%s/commands.md has no exit-codes section before progress", lang)
		}
		var rows []string
		for _, m := range rowRE.FindAllStringSubmatch(page[start:end], -1) {
			rows = append(rows, m[1])
		}
		var want []string
		for _, s := range statuses {
			want = append(want, fmt.Sprint(s))
		}
		if strings.Join(rows, ",") != strings.Join(want, ",") {
			t.Errorf("docs/%s/commands.md exit codes %v, want %v", lang, rows, want)
		}
		for _, c := range commands {
			if !strings.Contains(page, "`"+c.name+"`") {
				t.Errorf("docs/%s/commands.md does not name the command %q", lang, c.name)
			}
		}
	}
}
