package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// The exit statuses of every command: one table, documented in
// docs/{en,ko}/operations.md#exit-codes. A command uses only the rows that
// apply to it.
const (
	exitOK        = 0   // success (audit scan: the store is clean)
	exitFailure   = 1   // a permanent refusal (mint, deregister); anomalies found (audit scan); the daemon failed (serve)
	exitUsage     = 2   // bad flags or arguments, an invalid configuration, an unreadable input
	exitTransport = 3   // no protocol answer: the daemon is not running, refuses the connection, or answered garbage
	exitLimited   = 4   // audit scan --fail-on-limited N: more than N invocations limited in the window
	exitRetryable = 75  // RegistrarBusy (EX_TEMPFAIL): retry after retry_after seconds
	exitInterrupt = 130 // interrupted by SIGINT (128+2); the summary says what completed
	exitTerminate = 143 // stopped by SIGTERM (128+15); the summary says what completed
)

// exitPermanent is a permanent refusal's status.
const exitPermanent = exitFailure

// usageSpec is what a command's -h prints: a synopsis, a description of
// what the command does and exits with, and at least one example.
type usageSpec struct {
	name     string // "load wave"
	synopsis string // the flags after the name: "--hosts H --modules-per-host M [flags]"
	what     string // paragraphs, each line at most ~80 columns
	examples []string
}

// newFlagSet returns a flag set for the command that prints nothing by
// itself: parseFlags decides where the usage and the errors go.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("registrar-otel "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// printUsage writes the command's usage: synopsis, description, flags and
// examples.
func printUsage(w io.Writer, u usageSpec, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: registrar-otel %s %s\n\n", u.name, u.synopsis)
	fmt.Fprintln(w, strings.TrimSpace(u.what))
	fmt.Fprintln(w, "\nflags:")
	if fs != nil {
		printFlags(w, fs)
	}
	fmt.Fprintln(w, "  -h, --help\n    \tthis usage")
	if len(u.examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range u.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// printFlags lists the flags GNU-style (--name VALUE), as the synopses and
// the docs spell them; Go's flag package accepts one dash or two.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			if isStringFlag(f) {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w)
	})
}

// isStringFlag reports whether f holds a string (its default is quoted).
func isStringFlag(f *flag.Flag) bool {
	type getter interface{ Get() any }
	g, ok := f.Value.(getter)
	if !ok {
		return false
	}
	_, isString := g.Get().(string)
	return isString
}

// parseFlags parses args. -h and --help print the usage to stdout and
// return (exitOK, false); a bad flag prints the error and a one-line hint
// to stderr and returns (exitUsage, false); success returns (0, true).
// Positional arguments are refused the same way unless allowArgs.
func parseFlags(fs *flag.FlagSet, u usageSpec, args []string, stdout, stderr io.Writer) (int, bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, u, fs)
		return exitOK, false
	case err != nil:
		return flagError(fs, u, err, stderr), false
	case fs.NArg() > 0:
		return usageError(stderr, u.name, "unexpected argument %q", fs.Arg(0)), false
	}
	return 0, true
}

// flagError turns an error of the flag package into one that names the
// flag, says what it wanted, gives an example and, for an unknown flag,
// the flag it is most likely a misspelling of.
func flagError(fs *flag.FlagSet, u usageSpec, err error, stderr io.Writer) int {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		hint := ""
		if m := suggest(name, names); m != "" {
			hint = "; did you mean --" + m + "?"
		}
		return usageError(stderr, u.name, "unknown flag --%s%s", name, hint)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		f := fs.Lookup(strings.TrimPrefix(name, "-"))
		if f == nil {
			return usageError(stderr, u.name, "flag --%s needs a value", name)
		}
		return usageError(stderr, u.name, "flag --%s needs a value: %s; for example: %s", f.Name, expectation(f), flagExample(u, f))
	}
	// invalid value "V" for flag -NAME: REASON
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i > 0 {
			value := rest[:i]
			name, _, _ := strings.Cut(rest[i+len(" for flag -"):], ":")
			if f := fs.Lookup(name); f != nil {
				return usageError(stderr, u.name, "--%s: got %s, want %s; for example: %s", f.Name, value, expectation(f), flagExample(u, f))
			}
		}
	}
	return usageError(stderr, u.name, "%s", msg)
}

// flagValueError reports a value a flag parsed but a command refuses.
func flagValueError(stderr io.Writer, u usageSpec, name, value, want, example string) int {
	return usageError(stderr, u.name, "--%s: got %q, want %s; for example: %s", name, value, want, example)
}

// expectation says, for a flag's type, what a value must look like.
func expectation(f *flag.Flag) string {
	type getter interface{ Get() any }
	g, ok := f.Value.(getter)
	if !ok {
		return "a value"
	}
	switch g.Get().(type) {
	case uint, uint64:
		return "a whole number, 0 or more (decimal digits only)"
	case uint32:
		return "a whole number from 0 to 4294967295"
	case int, int64:
		return "a whole number"
	case time.Duration:
		return "a duration: a number and a unit (ms, s, m or h), such as 90s or 24h; there is no d"
	case bool:
		return "true or false"
	case float64:
		return "a number"
	}
	return "a value"
}

// flagExample is the flag as one of the command's examples spells it,
// or built from its default and type.
func flagExample(u usageSpec, f *flag.Flag) string {
	for _, e := range u.examples {
		fields := strings.Fields(e)
		for i, w := range fields {
			if w == "--"+f.Name && i+1 < len(fields) && !strings.HasPrefix(fields[i+1], "-") {
				return w + " " + fields[i+1]
			}
		}
	}
	if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
		return "--" + f.Name + " " + f.DefValue
	}
	switch expectation(f) {
	case "true or false":
		return "--" + f.Name
	}
	if strings.HasPrefix(expectation(f), "a duration") {
		return "--" + f.Name + " 30s"
	}
	return "--" + f.Name + " 10"
}

// usageError prints "registrar-otel NAME: message" and the hint to run -h,
// and returns exitUsage.
func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "registrar-otel %s: %s\n", name, fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "Run 'registrar-otel %s -h' for usage.\n", name)
	return exitUsage
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
