// Command registrar-otel runs the registrar daemon and its operator tools.
//
// Usage:
//
//	registrar-otel <command> [subcommand] [flags]
//
// Run "registrar-otel help" for the list of commands. Every command and
// subcommand answers -h/--help with its synopsis, flags and an example;
// a group ("config", "audit", "openbao", "load", "limits") alone lists its
// subcommands. The exit
// statuses are one table (cli.go), documented in docs/en/operations.md.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// command is one subcommand: it parses its own flags from args, writes to
// stdout and stderr, and returns the process exit status.
type command struct {
	name    string // one word, or group and subcommand ("config check")
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands in the order "help" lists them.
var commands = []command{
	{"serve", "run the daemon until SIGTERM or SIGINT", runServe},
	{"mint", "mint a service identity through the daemon's socket", runMint},
	{"deregister", "deregister a service identity through the daemon's socket", runDeregister},
	{"reload", "make the running daemon re-read its configuration (as SIGHUP does)", runReload},
	{"limits show", "show the running daemon's rate-limit buckets, of one identity or of all", runLimitsShow},
	{"limits reset", "refill one identity's rate-limit buckets in the running daemon (audited)", runLimitsReset},
	{"config check", "validate a configuration file (or the embedded defaults) and what it refers to", runConfigCheck},
	{"audit scan", "scan the audit record store for anomalies and summarise limited traffic", runAuditScan},
	{"audit verify", "verify the audit store: every deletion recorded, and with --key the sealed chain over every record", runAuditVerify},
	{"audit seal", "init: turn on the audit store's sealing and print its verification key, once", runAuditSeal},
	{"openbao check", "ask the OpenBao server whether the token holds exactly the documented policy", runOpenBaoCheck},
	{"backup", "write a consistent snapshot of the registry (online, or from a stopped daemon's file)", runBackup},
	{"sizing", "run a bring-up wave through the admission sizing formula", runSizing},
	{"load wave", "mint a bring-up wave against a running daemon and summarise it", runLoadWave},
	{"load flood", "flood one bucket of a running daemon and summarise it", runLoadFlood},
	{"version", "print the version, the revision and the Go toolchain", runVersion},
}

// groups maps a group name to a one-line summary.
var groups = map[string]string{
	"config":  "configuration tools",
	"audit":   "audit record store tools",
	"load":    "load drivers against a running daemon",
	"limits":  "a running daemon's rate-limit buckets, per identity",
	"openbao": "OpenBao backend tools",
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// dispatch picks the subcommand named by the leading arguments.
//
// A bare "registrar-otel", or a bare group ("registrar-otel audit"), is a
// usage error like any other: the list goes to stderr and the status is 2.
// Asking for it (-h, --help, help) prints it to stdout with status 0.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr, "")
		return exitUsage
	}
	if isHelp(args[0]) {
		usage(stdout, "")
		return exitOK
	}
	switch args[0] {
	case "--version", "-version":
		if len(args) > 1 {
			return usageError(stderr, "--version", "unexpected argument %q (for --json, run 'registrar-otel version --json')", args[1])
		}
		return runVersion(nil, stdout, stderr)
	case "help":
		// "help X [Y]" is "X [Y] -h".
		if len(args) == 1 {
			usage(stdout, "")
			return exitOK
		}
		return dispatch(append(append([]string{}, args[1:]...), "-h"), stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "registrar-otel: flag %s before any command\n", args[0])
		fmt.Fprintln(stderr, "Run 'registrar-otel -h' for the commands.")
		return exitUsage
	}
	if _, ok := groups[args[0]]; ok {
		if len(args) == 1 {
			usage(stderr, args[0])
			return exitUsage
		}
		if isHelp(args[1]) {
			usage(stdout, args[0])
			return exitOK
		}
		if c, ok := lookup(args[0] + " " + args[1]); ok {
			return c.run(args[2:], stdout, stderr)
		}
		var subs []string
		for _, c := range commands {
			if sub, ok := strings.CutPrefix(c.name, args[0]+" "); ok {
				subs = append(subs, sub)
			}
		}
		hint := ""
		if m := suggest(args[1], subs); m != "" {
			hint = fmt.Sprintf("; did you mean %q?", args[0]+" "+m)
		}
		fmt.Fprintf(stderr, "registrar-otel: unknown command %q%s\n", args[0]+" "+args[1], hint)
		fmt.Fprintf(stderr, "Run 'registrar-otel %s -h' for its subcommands.\n", args[0])
		return exitUsage
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(args[1:], stdout, stderr)
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	hint := ""
	if m := suggest(args[0], names); m != "" {
		hint = fmt.Sprintf("; did you mean %q?", m)
	}
	fmt.Fprintf(stderr, "registrar-otel: unknown command %q%s\n", args[0], hint)
	fmt.Fprintln(stderr, "Run 'registrar-otel -h' for the commands.")
	return exitUsage
}

// usage lists the commands, or the subcommands of group.
func usage(w io.Writer, group string) {
	if group != "" {
		fmt.Fprintf(w, "usage: registrar-otel %s <subcommand> [flags]\n\n%s.\n\nsubcommands:\n", group, capitalise(groups[group]))
		for _, c := range commands {
			if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
				fmt.Fprintf(w, "  %-14s %s\n", sub, c.summary)
			}
		}
		fmt.Fprintf(w, "\nRun 'registrar-otel %s <subcommand> -h' for a subcommand's flags and an example.\n", group)
		return
	}
	fmt.Fprintln(w, "usage: registrar-otel <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The rate-limiting guard of a certificate registrar, and its operator tools.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "flags:")
	fmt.Fprintln(w, "  -h, --help     this list")
	fmt.Fprintln(w, "  --version      the version (same as the version command)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "examples:")
	fmt.Fprintln(w, "  registrar-otel serve")
	fmt.Fprintln(w, "  registrar-otel config check --config /etc/registrar-otel/registrar.toml")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'registrar-otel <command> -h' for a command's flags and an example.")
	fmt.Fprintln(w, "Exit statuses: 0 success, 1 refused or anomalies, 2 usage or configuration,")
	fmt.Fprintln(w, "3 daemon unreachable, 4 audit scan --fail-on-limited exceeded, 75 retry later,")
	fmt.Fprintln(w, "130 interrupted (see docs: commands, exit codes).")
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
