package main

// The man pages and the bash completion the package installs are generated
// from the very text -h prints (packaging/man/, packaging/completion/), so
// they cannot drift: a usage change without `go test -run
// TestManPagesAndCompletion -update` fails here.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// helpText is what "registrar-otel [NAME] -h" prints.
func helpText(t *testing.T, name string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append(strings.Fields(name), "-h")
	if code := dispatch(args, &out, &errOut); code != exitOK {
		t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
	}
	return out.String()
}

// manPageName is the page of a command: registrar-otel-config-check.
func manPageName(name string) string {
	if name == "" {
		return "registrar-otel"
	}
	return "registrar-otel-" + strings.ReplaceAll(name, " ", "-")
}

// roffEscape makes a line of -h text literal roff.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// renderManPage turns a command's -h text into a man page: the usage line
// is the SYNOPSIS, the description DESCRIPTION, the flags OPTIONS and the
// examples EXAMPLES, each line of the text kept as it is.
func renderManPage(name, summary, help string) string {
	page := manPageName(name)
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" Generated from `registrar-otel %s-h` by cmd/registrar-otel/manpages_test.go; do not edit.\n", strings.TrimSpace(name+" "))
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"registrar-otel\" \"registrar-otel manual\"\n", strings.ToUpper(roffEscape(page)))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffEscape(page), roffEscape(summary))
	section := ""
	for _, line := range strings.Split(strings.TrimRight(help, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "usage: "):
			fmt.Fprintf(&b, ".SH SYNOPSIS\n.nf\n%s\n.fi\n.SH DESCRIPTION\n", roffEscape(strings.TrimPrefix(line, "usage: ")))
			section = "description"
			continue
		case line == "flags:" || line == "commands:" || line == "subcommands:":
			fmt.Fprintf(&b, ".SH %s\n.nf\n", map[string]string{"flags:": "OPTIONS", "commands:": "COMMANDS", "subcommands:": "COMMANDS"}[line])
			section = "list"
			continue
		case line == "examples:":
			if section == "list" {
				b.WriteString(".fi\n")
			}
			b.WriteString(".SH EXAMPLES\n.nf\n")
			section = "examples"
			continue
		}
		if line == "" {
			if section == "description" {
				b.WriteString(".PP\n")
			} else {
				b.WriteString("\n")
			}
			continue
		}
		b.WriteString(roffEscape(line) + "\n")
		if section == "description" {
			b.WriteString(".br\n")
		}
	}
	if section == "list" || section == "examples" {
		b.WriteString(".fi\n")
	}
	if name != "" {
		b.WriteString(".SH SEE ALSO\n.BR registrar\\-otel (1)\n")
	} else {
		b.WriteString(".SH SEE ALSO\n/usr/share/doc/registrar\\-otel/en/commands.md\n")
	}
	return b.String()
}

// flagsOf lists the --flags of a -h text.
func flagsOf(help string) []string {
	var flags []string
	for _, line := range strings.Split(help, "\n") {
		if f, ok := strings.CutPrefix(line, "  --"); ok {
			flags = append(flags, "--"+strings.Fields(f)[0])
		}
	}
	return append(flags, "--help")
}

// renderCompletion is the bash completion: the commands, each group's
// subcommands, and each command's flags, all read from the -h texts.
func renderCompletion(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# bash completion for registrar-otel. Generated from the -h texts by\n# cmd/registrar-otel/manpages_test.go; do not edit.\n")
	b.WriteString("_registrar_otel() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} words\n")
	var top []string
	for _, c := range commands {
		if w := strings.Fields(c.name)[0]; !slices.Contains(top, w) {
			top = append(top, w)
		}
	}
	top = append(top, "help")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\twords=%q\n", strings.Join(top, " "))
	groupNames := make([]string, 0, len(groups))
	for g := range groups {
		groupNames = append(groupNames, g)
	}
	sort.Strings(groupNames)
	b.WriteString("\telse\n\t\tcase \"${COMP_WORDS[1]}\" in\n")
	for _, g := range groupNames {
		var subs []string
		for _, c := range commands {
			if s, ok := strings.CutPrefix(c.name, g+" "); ok {
				subs = append(subs, s)
			}
		}
		fmt.Fprintf(&b, "\t\t%s)\n\t\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then\n\t\t\t\twords=%q\n\t\t\telse\n\t\t\t\tcase \"${COMP_WORDS[2]}\" in\n", g, strings.Join(subs, " "))
		for _, s := range subs {
			fmt.Fprintf(&b, "\t\t\t\t%s) words=%q ;;\n", s, strings.Join(flagsOf(helpText(t, g+" "+s)), " "))
		}
		b.WriteString("\t\t\t\tesac\n\t\t\tfi\n\t\t\t;;\n")
	}
	for _, c := range commands {
		if !strings.Contains(c.name, " ") {
			fmt.Fprintf(&b, "\t\t%s) words=%q ;;\n", c.name, strings.Join(flagsOf(helpText(t, c.name)), " "))
		}
	}
	b.WriteString("\t\tesac\n\tfi\n\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -F _registrar_otel registrar-otel\n")
	return b.String()
}

func TestManPagesAndCompletionAreTheHelpTexts(t *testing.T) {
	root := filepath.Join("..", "..", "packaging")
	want := map[string]string{}
	want[filepath.Join("man", "registrar-otel.1")] = renderManPage("", "the rate-limiting guard of a certificate registrar, and its operator tools", helpText(t, ""))
	for g, summary := range groups {
		want[filepath.Join("man", manPageName(g)+".1")] = renderManPage(g, summary, helpText(t, g))
	}
	for _, c := range commands {
		want[filepath.Join("man", manPageName(c.name)+".1")] = renderManPage(c.name, c.summary, helpText(t, c.name))
	}
	want[filepath.Join("completion", "registrar-otel")] = renderCompletion(t)
	if *update {
		os.RemoveAll(filepath.Join(root, "man"))
		for _, d := range []string{"man", "completion"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, text := range want {
			writeFile(t, filepath.Join(root, name), []byte(text), 0o644)
		}
	}
	for name, text := range want {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%v (regenerate with go test -run TestManPagesAndCompletion -update ./cmd/registrar-otel)", err)
			continue
		}
		if string(got) != text {
			t.Errorf("packaging/%s differs from what -h prints (regenerate with -update)", name)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root, "man"))
	for _, e := range entries {
		if _, ok := want[filepath.Join("man", e.Name())]; !ok {
			t.Errorf("packaging/man/%s is no command's page", e.Name())
		}
	}
}
