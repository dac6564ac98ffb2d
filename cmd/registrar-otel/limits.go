package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

var limitsShowUsage = usageSpec{
	name:     "limits show",
	synopsis: "[--identity ID] [--config FILE | --socket PATH] [--json] [--timeout D]",
	what: `Shows the running daemon's rate-limit buckets of one identity (--identity, as
the audit records name it), or of every identity with an entry in the
limiter's map (at most 512 entries), over its unix socket: only the daemon's
own uid and root may ask (anyone else gets AdminForbidden). For each identity,
its caller policy and pool (local: unix-socket callers; remote: certificate
identities), then one line per bucket (mint and deregister, each
predecision_refusal and admission): its state, tokens left of its burst, the
refill interval (one token per interval) and the retry-after of a charge now.

  entry     the identity has its own bucket: the numbers are its own
  absent    no entry: its next charge starts a full bucket
  overflow  no entry, and its pool is at its cap with every entry drained:
            its next charge falls on the pool's shared overflow bucket,
            whose numbers are shown

A policy with shadow sizes shows its shadow bucket on the line below.
Then each pool's overflow buckets. An identity the daemon has not seen is
shown absent in every bucket. --json prints the daemon's answer.

Exit status: 0 shown, 1 refused (AdminForbidden, AdminUnsupported: the daemon
offers no limiter to inspect) or failed (AdminFailed), 2 usage error (a bad
flag or --identity), 3 the daemon is not running or does not speak the
protocol.`,
	examples: []string{
		"registrar-otel limits show --config /etc/registrar-otel/registrar.toml",
		"sudo -u registrar-otel registrar-otel limits show --identity registrar-client:uri:spiffe://example.org/agent/h1 --json",
	},
}

var limitsResetUsage = usageSpec{
	name:     "limits reset",
	synopsis: "--identity ID [--verb V] [--bucket B] [--config FILE | --socket PATH] [--json] [--timeout D]",
	what: `Refills one identity's rate-limit buckets to their burst in the running
daemon, without the restart that would refill every identity's (a flooder's
too): every bucket of the identity, or only those of --verb (mint or
deregister) and of --bucket (predecision_refusal or admission). A policy's
shadow buckets are refilled with them. An absent key needs no refill (its next
charge starts a full bucket); a key on the overflow bucket is not refilled
(that bucket is shared). The daemon writes the reset to the audit store, an
administrative record naming who reset what. Over the unix socket, for the
daemon's own uid and root only (anyone else gets AdminForbidden). Prints each
bucket's tokens before and after; --json prints the daemon's answer.

Exit status: 0 reset and recorded, 1 refused (AdminForbidden,
AdminUnsupported), failed (AdminFailed) or not recorded, 2 usage error (a bad
flag, --identity, --verb or --bucket), 3 the daemon is not running or does
not speak the protocol.`,
	examples: []string{
		"registrar-otel limits reset --config /etc/registrar-otel/registrar.toml --identity registrar-client:uri:spiffe://example.org/agent/h1",
		"sudo -u registrar-otel registrar-otel limits reset --identity unix-peer:uid=0 --verb mint --bucket admission",
	},
}

// adminFlags are the flags of an administrative command over the socket.
type adminFlags struct {
	socket, config string
	timeout        time.Duration
	asJSON         bool
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.socket, "socket", "", "the daemon's unix socket `path` (default: registrar.socket_path of --config, or of the embedded defaults: "+defaultSocket()+")")
	fs.StringVar(&a.config, "config", "", "the daemon's configuration `file`, to find registrar.socket_path (default: the embedded defaults, as make run)")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "give up on the call after this long")
	fs.BoolVar(&a.asJSON, "json", false, "print the daemon's answer as JSON on stdout")
}

// client resolves the socket and builds its client; false after printing
// why it could not.
func (a *adminFlags) client(name string, stderr io.Writer) (*wire.Client, daemonAddr, bool) {
	path, err := resolveSocket(a.socket, a.config, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "registrar-otel %s: ", name)
		printErrors(stderr, err)
		return nil, daemonAddr{}, false
	}
	fromDefault := a.socket == "" && a.config == "" && path == defaultSocket()
	cl, err := unixClient(path, a.config, fromDefault, stderr, wire.WithTimeout(a.timeout))
	if err != nil {
		fmt.Fprintf(stderr, "registrar-otel %s: ", name)
		printErrors(stderr, err)
		return nil, daemonAddr{}, false
	}
	return cl, daemonAddr{socket: path, fromConfig: a.config, fromDefault: fromDefault}, true
}

// adminFailure prints why an administrative call got no answer and
// returns its exit status: a refusal 1 (a bad request 2, it is the
// caller's), no protocol answer 3.
func adminFailure(stderr io.Writer, name string, addr daemonAddr, err error) int {
	var ae *wire.AdminError
	var re *wire.AdminRequestError
	switch {
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "registrar-otel %s: %s (HTTP %d): %s\n", name, ae.ID, ae.StatusCode, ae.Detail)
		switch ae.ID {
		case wire.AdminForbidden:
			fmt.Fprintf(stderr, "  run it as the daemon's user (sudo -u registrar-otel registrar-otel %s ...) or as root\n", name)
		case wire.AdminBadRequest:
			return exitUsage
		}
		return exitFailure
	case errors.As(err, &re):
		return usageError(stderr, name, "--%s", re.Error())
	}
	return transportError(stderr, name, addr, err)
}

// printJSON writes v as the one indented JSON object of --json.
func printJSON(stdout io.Writer, v any) {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// runLimitsShow implements "registrar-otel limits show".
func runLimitsShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("limits show")
	var a adminFlags
	a.register(fs)
	identity := fs.String("identity", "", "show this `identity` only, as the audit records name it (unix-peer:uid=N, registrar-client:uri:..., registrar-client:dns:...); default every identity with an entry")
	if code, ok := parseFlags(fs, limitsShowUsage, args, stdout, stderr); !ok {
		return code
	}
	req := wire.LimitsRequest{Identity: *identity}
	if flagSet(fs, "identity") {
		if err := wire.CheckIdentity(*identity); err != nil {
			return usageError(stderr, limitsShowUsage.name, "--%s", err)
		}
	}
	c, addr, ok := a.client(limitsShowUsage.name, stderr)
	if !ok {
		return exitUsage
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	ans, err := c.Limits(ctx, req)
	if err != nil {
		return adminFailure(stderr, limitsShowUsage.name, addr, err)
	}
	if a.asJSON {
		printJSON(stdout, ans)
	} else {
		printLimits(stdout, ans)
	}
	return exitOK
}

// runLimitsReset implements "registrar-otel limits reset".
func runLimitsReset(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("limits reset")
	var a adminFlags
	a.register(fs)
	identity := fs.String("identity", "", "reset this `identity`'s buckets, as the audit records name it (required)")
	verbName := fs.String("verb", "", "reset this `verb`'s buckets only: mint or deregister (default both)")
	bucketName := fs.String("bucket", "", "reset this `bucket` only: predecision_refusal or admission (default both)")
	if code, ok := parseFlags(fs, limitsResetUsage, args, stdout, stderr); !ok {
		return code
	}
	u := limitsResetUsage
	if !flagSet(fs, "identity") {
		return usageError(stderr, u.name, "--identity ID is required: the identity whose buckets to reset (limits show lists them)")
	}
	req := wire.LimitsResetRequest{Identity: *identity}
	if err := wire.CheckIdentity(*identity); err != nil {
		return usageError(stderr, u.name, "--%s", err)
	}
	if flagSet(fs, "verb") {
		v, err := vocab.ParseVerb(*verbName)
		if err != nil {
			return flagValueError(stderr, u, "verb", *verbName, `mint or deregister`+didYouMean(*verbName, []string{"mint", "deregister"}), "--verb mint")
		}
		req.Verb = &v
	}
	if flagSet(fs, "bucket") {
		b, err := vocab.ParseBucket(*bucketName)
		if err != nil {
			return flagValueError(stderr, u, "bucket", *bucketName, `predecision_refusal or admission`+didYouMean(*bucketName, []string{"predecision_refusal", "admission"}), "--bucket admission")
		}
		req.Bucket = &b
	}
	c, addr, ok := a.client(u.name, stderr)
	if !ok {
		return exitUsage
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	ans, err := c.LimitsReset(ctx, req)
	if err != nil {
		return adminFailure(stderr, u.name, addr, err)
	}
	if a.asJSON {
		printJSON(stdout, ans)
	} else {
		printLimitsReset(stdout, ans)
	}
	if !ans.Recorded {
		fmt.Fprintln(stderr, "registrar-otel limits reset: the daemon reset the buckets but did not record the reset in the audit store")
		return exitFailure
	}
	return exitOK
}
