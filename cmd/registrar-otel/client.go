package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// connFlags are the flags every client subcommand shares.
type connFlags struct {
	socket, config          string
	tlsAddr, cert, key, ca  string
	timeout                 time.Duration
	asJSON                  bool
	serviceName, host, comp string
	instance                uint
	idempotencyKey          string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", "", "the daemon's unix socket `path` (default: registrar.socket_path of --config, or of the embedded defaults: "+defaultSocket()+")")
	fs.StringVar(&c.config, "config", "", "the daemon's configuration `file`, to find registrar.socket_path (default: the embedded defaults, as make run)")
	fs.StringVar(&c.tlsAddr, "tls-addr", "", "connect over TCP with mutual TLS to host:port instead of the socket")
	fs.StringVar(&c.cert, "tls-cert", "", "client certificate (PEM) for --tls-addr")
	fs.StringVar(&c.key, "tls-key", "", "client key (PEM) for --tls-addr")
	fs.StringVar(&c.ca, "tls-ca", "", "CA certificate (PEM) that signed the daemon's certificate, for --tls-addr")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on the call after this long")
	fs.BoolVar(&c.asJSON, "json", false, "print the daemon's answer (the wire protocol's response object) unchanged on stdout")
	fs.StringVar(&c.serviceName, "service-name", "", "the service's name (a DNS label)")
	fs.StringVar(&c.host, "host", "", "the host the service runs on (a DNS label)")
	fs.StringVar(&c.comp, "component", "", "the configured component")
	fs.UintVar(&c.instance, "instance", 0, "the instance number, 1..999, for a many-per-host component (0: none)")
	fs.StringVar(&c.idempotencyKey, "idempotency-key", "", "an idempotency key to send (optional)")
}

// client builds the wire client the flags describe, and says where it
// connects (the socket path or the TLS address) for error messages.
func (c *connFlags) client(stderr io.Writer) (*wire.Client, daemonAddr, error) {
	opts := []wire.ClientOption{wire.WithTimeout(c.timeout)}
	if c.tlsAddr != "" {
		if c.cert == "" || c.key == "" || c.ca == "" {
			return nil, daemonAddr{}, errors.New("--tls-addr needs --tls-cert, --tls-key and --tls-ca")
		}
		cert, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, daemonAddr{}, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, daemonAddr{}, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, daemonAddr{}, fmt.Errorf("--tls-ca %s: no PEM certificate found", c.ca)
		}
		return wire.NewTLSClient(c.tlsAddr, &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
		}, opts...), daemonAddr{tls: c.tlsAddr}, nil
	}
	socket, err := resolveSocket(c.socket, c.config, stderr)
	if err != nil {
		return nil, daemonAddr{}, err
	}
	fromDefault := c.socket == "" && c.config == "" && socket == defaultSocket()
	cl, err := unixClient(socket, c.config, fromDefault, stderr, opts...)
	if err != nil {
		return nil, daemonAddr{}, err
	}
	return cl, daemonAddr{socket: socket, fromConfig: c.config, fromDefault: fromDefault}, nil
}

// resolveSocket is --socket, or registrar.socket_path of --config (or of
// the embedded defaults with the environment's overrides).
func resolveSocket(socket, cfgPath string, stderr io.Writer) (string, error) {
	if socket != "" {
		return socket, nil
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg, err := loadConfig(cfgPath, os.Environ(), logger)
	if err != nil {
		return "", err
	}
	return cfg.Registrar.SocketPath, nil
}

// defaultSocket is the embedded default socket path (what make run uses).
func defaultSocket() string { return config.Default().Registrar.SocketPath }

// runMint implements "registrar-otel mint".
func runMint(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mint")
	var c connFlags
	c.register(fs)
	reload := fs.String("reload", "", "the spec's reload command")
	specService := fs.String("spec-service-name", "", "the spec's service_name (default: --service-name)")
	specComponent := fs.String("spec-component", "", "the spec's component (default: --component)")
	wrapTTL := fs.Uint64("wrap-ttl", 300, "lifetime of the wrapped secret in seconds (1..registrar.max_wrap_ttl_seconds)")
	if code, ok := parseFlags(fs, mintUsage, args, stdout, stderr); !ok {
		return code
	}
	cl, addr, ok := c.parsed(stderr, "mint")
	if !ok {
		return exitUsage
	}
	if *specService == "" {
		*specService = c.serviceName
	}
	if *specComponent == "" {
		*specComponent = c.comp
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	resp, err := cl.Mint(ctx, wire.MintRequest{
		ProtocolVersion: wire.ProtocolVersion,
		ServiceName:     c.serviceName,
		Host:            c.host,
		Instance:        uint32(c.instance),
		Component:       c.comp,
		Spec:            wire.Spec{Component: *specComponent, ServiceName: *specService, Reload: *reload},
		WrapTTL:         *wrapTTL,
		IdempotencyKey:  c.idempotencyKey,
	})
	return answer(stdout, stderr, "mint", addr, c.asJSON, resp, err)
}

// runDeregister implements "registrar-otel deregister".
func runDeregister(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("deregister")
	var c connFlags
	c.register(fs)
	if code, ok := parseFlags(fs, deregisterUsage, args, stdout, stderr); !ok {
		return code
	}
	cl, addr, ok := c.parsed(stderr, "deregister")
	if !ok {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	resp, err := cl.Deregister(ctx, wire.DeregisterRequest{
		ProtocolVersion: wire.ProtocolVersion,
		ServiceName:     c.serviceName,
		Host:            c.host,
		Instance:        uint32(c.instance),
		Component:       c.comp,
		IdempotencyKey:  c.idempotencyKey,
	})
	return answer(stdout, stderr, "deregister", addr, c.asJSON, resp, err)
}

// parsed checks what both client subcommands share after flag parsing (the
// identity's three flags given, an instance that fits 32 bits) and builds the client. It reports false after
// printing why.
func (c *connFlags) parsed(stderr io.Writer, verb string) (*wire.Client, daemonAddr, bool) {
	var missing []string
	for _, f := range []struct{ name, val string }{{"--service-name", c.serviceName}, {"--host", c.host}, {"--component", c.comp}} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		usageError(stderr, verb, "%s required (--service-name, --host and --component name the identity)", strings.Join(missing, ", "))
		return nil, daemonAddr{}, false
	}
	if c.instance > 1<<32-1 {
		usageError(stderr, verb, "--instance %d is out of range (1..999, or 0 for none)", c.instance)
		return nil, daemonAddr{}, false
	}
	cl, addr, err := c.client(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "registrar-otel %s: ", verb)
		printErrors(stderr, err)
		return nil, daemonAddr{}, false
	}
	return cl, addr, true
}

const clientExits = `Exit status: 0 success, 1 permanent refusal (retrying the same request cannot
succeed), 2 usage or configuration error, 3 the daemon is not running or does
not speak the protocol, 75 RegistrarBusy (retry after retry_after seconds).`

var mintUsage = usageSpec{
	name:     "mint",
	synopsis: "--service-name S --host H --component C [--instance N] [--config FILE | --socket PATH] [--json] [flags]",
	what: `Creates (or idempotently re-issues) a service identity through the daemon and
prints its bootstrap material: role_id, wrapped_secret_id and its expiry, and
the registrar_health the answer carried. With --json, stdout is the daemon's
response object exactly as received (docs: wire protocol).

` + clientExits,
	examples: []string{
		"registrar-otel mint --service-name review --host h1 --component review --instance 1",
		"registrar-otel mint --config /etc/registrar-otel/registrar.toml --service-name api --host h1 --component edge-proxy --json",
	},
}

var deregisterUsage = usageSpec{
	name:     "deregister",
	synopsis: "--service-name S --host H --component C [--instance N] [--config FILE | --socket PATH] [--json] [flags]",
	what: `Removes a service identity through the daemon: "removed", or "already_absent"
when there was nothing to remove (deregister is idempotent). With --json,
stdout is the daemon's response object exactly as received.

` + clientExits,
	examples: []string{
		"registrar-otel deregister --service-name review --host h1 --component review --instance 1",
	},
}

// answer prints a response and maps it to the exit status by class.
func answer(stdout, stderr io.Writer, verb string, addr daemonAddr, asJSON bool, resp *wire.Response, err error) int {
	if err != nil {
		return transportError(stderr, verb, addr, err)
	}
	if asJSON {
		stdout.Write(resp.Body)
		if n := len(resp.Body); n == 0 || resp.Body[n-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	}
	h, ac := resp.Health.Limiter, resp.Health.AuditCapacity
	healthLine := fmt.Sprintf("registrar_health: limited_predecision_refusal=%d limited_admission=%d", h.LimitedPredecisionRefusal, h.LimitedAdmission) +
		fmt.Sprintf("\n  audit_capacity: state=%s free_bytes=%d store_bytes=%d budget_bytes=%d append_failures=%d",
			ac.State, ac.FreeBytes, ac.StoreBytes, ac.BudgetBytes, ac.AppendFailures)
	if rs := resp.Health.Restart; rs.Unclean {
		// Only after an unclean stop: a clean start prints nothing more.
		healthLine += fmt.Sprintf("\n  restart: unclean checkpoint=%s evidence_gap_from=%s evidence_gap_to=%s recovered_records=%d recovered_count=%d",
			rs.Checkpoint, rs.EvidenceGapFrom, rs.EvidenceGapTo, rs.RecoveredRecords, rs.RecoveredCount)
	}
	switch {
	case resp.OK():
		if !asJSON {
			fmt.Fprintf(stdout, "%s %s (request %s)\n", resp.Outcome, resp.RegistrationID, resp.RequestID)
			if m := resp.Material; m != nil {
				fmt.Fprintf(stdout, "  role_id:           %s\n", m.RoleID)
				fmt.Fprintf(stdout, "  wrapped_secret_id: %s\n", m.WrappedSecretID)
				fmt.Fprintf(stdout, "  expires_at:        %s\n", m.ExpiresAt)
			}
			fmt.Fprintf(stdout, "  %s\n", healthLine)
		}
		return exitOK
	case resp.Retryable():
		if !asJSON {
			fmt.Fprintf(stderr, "%s: %s (retryable): retry after %d s (request %s)\n  %s\n", verb, resp.ErrorID, resp.RetryAfter, resp.RequestID, healthLine)
		}
		return exitRetryable
	}
	if !asJSON {
		detail := ""
		switch {
		case resp.Scope != "":
			detail = ": " + resp.Reason + " (" + resp.Scope + ")"
		case resp.Ceiling != "":
			detail = fmt.Sprintf(": %s = %d", resp.Ceiling, resp.Limit)
		case resp.Reason != "":
			detail = ": " + resp.Reason
		case resp.Detail != "":
			detail = ": " + resp.Detail
		}
		id := ""
		if resp.RegistrationID != "" {
			id = ", registration " + resp.RegistrationID
		}
		fmt.Fprintf(stderr, "%s: %s%s (permanent; HTTP %d; request %s%s)\n  %s\n", verb, resp.ErrorID, detail, resp.StatusCode, resp.RequestID, id, healthLine)
	}
	return exitPermanent
}
