package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

var reloadUsage = usageSpec{
	name:     "reload",
	synopsis: "[--config FILE | --socket PATH] [--json] [--timeout D]",
	what: `Asks the running daemon to re-read its configuration file and environment,
as SIGHUP (and systemctl reload) does, over its unix socket: only the daemon's
own uid and root may (anyone else gets AdminForbidden). The new configuration
is validated as at start and applied whole, or not at all: the live keys (the
rate limits, the coalescing window, the capacity reserve, the components, the
OpenBao token) change in place, without a restart; a change of a restart-only
key refuses the reload, naming the key. Prints the changed keys (old -> new)
or the errors; --json prints the daemon's answer unchanged.

Exit status: 0 applied, 1 refused as not allowed (AdminForbidden), 2 the new
configuration was refused (the errors are printed, as by config check; the old
one stays in force), 3 the daemon is not running or does not speak the
protocol.`,
	examples: []string{
		"registrar-otel reload --config /etc/registrar-otel/registrar.toml",
		"sudo -u registrar-otel registrar-otel reload --socket /run/registrar-otel/registrar.sock",
	},
}

// runReload implements "registrar-otel reload".
func runReload(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reload")
	socket := fs.String("socket", "", "the daemon's unix socket `path` (default: registrar.socket_path of --config, or of the embedded defaults: "+defaultSocket()+")")
	cfgPath := fs.String("config", "", "the daemon's configuration `file`, to find registrar.socket_path (default: the embedded defaults, as make run)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the call after this long")
	asJSON := fs.Bool("json", false, "print the daemon's answer unchanged on stdout")
	if code, ok := parseFlags(fs, reloadUsage, args, stdout, stderr); !ok {
		return code
	}
	path, err := resolveSocket(*socket, *cfgPath, stderr)
	if err != nil {
		fmt.Fprint(stderr, "registrar-otel reload: ")
		printErrors(stderr, err)
		return exitUsage
	}
	c, err := unixClient(path, *cfgPath, *socket == "" && *cfgPath == "" && path == defaultSocket(), stderr, wire.WithTimeout(*timeout))
	if err != nil {
		fmt.Fprint(stderr, "registrar-otel reload: ")
		printErrors(stderr, err)
		return exitUsage
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := c.Reload(ctx)
	var ae *wire.AdminError
	switch {
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "registrar-otel reload: %s (HTTP %d): %s\n", ae.ID, ae.StatusCode, ae.Detail)
		return exitFailure
	case err != nil:
		return transportError(stderr, "reload", daemonAddr{socket: path, fromConfig: *cfgPath}, err)
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if !res.Applied {
		if !*asJSON {
			fmt.Fprintln(stderr, "registrar-otel reload: refused; the previous configuration stays in force, nothing of the new one applied:")
			for _, e := range res.Errors {
				fmt.Fprintf(stderr, "  %s\n", e)
			}
		}
		return exitUsage
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "configuration reloaded: %d key(s) changed\n", len(res.Changes))
		for _, ch := range res.Changes {
			fmt.Fprintf(stdout, "  %s: %s -> %s\n", ch.Key, ch.Old, ch.New)
		}
	}
	return exitOK
}
