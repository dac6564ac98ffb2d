// Command registrar-otel runs the registrar daemon and its operator tools.
//
// Usage:
//
//	registrar-otel <command> [flags]
//
// Run "registrar-otel help" for the list of commands. Each command parses
// its own flags; "registrar-otel <command> -h" prints them.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: it parses its own flags from args, writes to
// stdout and stderr, and returns the process exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands maps a subcommand (possibly two words, like "config check") to
// its implementation.
var commands = map[string]command{
	"serve":        {"run the daemon until SIGTERM or SIGINT", runServe},
	"mint":         {"mint a service identity through the daemon's socket", runMint},
	"deregister":   {"deregister a service identity through the daemon's socket", runDeregister},
	"config check": {"validate a configuration file (or the embedded defaults) and print every error", runConfigCheck},
	"audit scan":   {"scan the audit record store for anomalies and summarise limited traffic", runAuditScan},
	"sizing":       {"run a bring-up wave through the admission sizing formula", runSizing},
	"load wave":    {"mint a bring-up wave against a running daemon and summarise it", runLoadWave},
	"load flood":   {"flood one bucket of a running daemon and summarise it", runLoadFlood},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the subcommand named by the leading arguments.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c.run(args[2:], stdout, stderr)
		}
	}
	if c, ok := commands[args[0]]; ok {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "registrar-otel: unknown command %q\n\n", strings.Join(args[:min(len(args), 2)], " "))
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: registrar-otel <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `run "registrar-otel <command> -h" for a command's flags`)
}
