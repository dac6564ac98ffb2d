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
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// Exit statuses of the client subcommands, by the answer's class.
const (
	exitOK        = 0  // success
	exitPermanent = 1  // a permanent refusal: retrying the same request cannot succeed
	exitUsage     = 2  // bad flags or configuration
	exitTransport = 3  // no protocol answer: the daemon is unreachable or answered garbage
	exitRetryable = 75 // RegistrarBusy (EX_TEMPFAIL): retry after retry_after seconds
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
	fs.StringVar(&c.socket, "socket", "", "the daemon's unix socket (default: registrar.socket_path of --config, or of the embedded defaults)")
	fs.StringVar(&c.config, "config", "", "configuration file to read registrar.socket_path from")
	fs.StringVar(&c.tlsAddr, "tls-addr", "", "connect over TCP with mutual TLS to host:port instead of the socket")
	fs.StringVar(&c.cert, "tls-cert", "", "client certificate (PEM) for --tls-addr")
	fs.StringVar(&c.key, "tls-key", "", "client key (PEM) for --tls-addr")
	fs.StringVar(&c.ca, "tls-ca", "", "CA certificate (PEM) that signed the daemon's certificate, for --tls-addr")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on the call after this long")
	fs.BoolVar(&c.asJSON, "json", false, "print the daemon's answer as JSON, unchanged")
	fs.StringVar(&c.serviceName, "service-name", "", "the service's name (a DNS label)")
	fs.StringVar(&c.host, "host", "", "the host the service runs on (a DNS label)")
	fs.StringVar(&c.comp, "component", "", "the configured component")
	fs.UintVar(&c.instance, "instance", 0, "the instance number, 1..999, for a many-per-host component (0: none)")
	fs.StringVar(&c.idempotencyKey, "idempotency-key", "", "an idempotency key to send (optional)")
}

// client builds the wire client the flags describe.
func (c *connFlags) client(stderr io.Writer) (*wire.Client, error) {
	opts := []wire.ClientOption{wire.WithTimeout(c.timeout)}
	if c.tlsAddr != "" {
		if c.cert == "" || c.key == "" || c.ca == "" {
			return nil, errors.New("--tls-addr needs --tls-cert, --tls-key and --tls-ca")
		}
		cert, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate found", c.ca)
		}
		return wire.NewTLSClient(c.tlsAddr, &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
		}, opts...), nil
	}
	socket := c.socket
	if socket == "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := config.Load(c.config, os.Environ(), logger)
		if err != nil {
			return nil, err
		}
		socket = cfg.Registrar.SocketPath
	}
	return wire.NewUnixClient(socket, opts...), nil
}

// runMint implements "registrar-otel mint".
func runMint(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c connFlags
	c.register(fs)
	reload := fs.String("reload", "", "the spec's reload command")
	specService := fs.String("spec-service-name", "", "the spec's service_name (default: --service-name)")
	specComponent := fs.String("spec-component", "", "the spec's component (default: --component)")
	wrapTTL := fs.Uint64("wrap-ttl", 300, "lifetime of the wrapped secret in seconds (1..registrar.max_wrap_ttl_seconds)")
	fs.Usage = clientUsage(fs, stderr, "mint", "create (or idempotently re-issue) a service identity and print its bootstrap material")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cl, ok := c.parsed(fs, stderr, "mint")
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
	return answer(stdout, stderr, "mint", c.asJSON, resp, err)
}

// runDeregister implements "registrar-otel deregister".
func runDeregister(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("deregister", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c connFlags
	c.register(fs)
	fs.Usage = clientUsage(fs, stderr, "deregister", "remove a service identity")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cl, ok := c.parsed(fs, stderr, "deregister")
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
	return answer(stdout, stderr, "deregister", c.asJSON, resp, err)
}

// parsed checks what both client subcommands share after flag parsing (no
// stray argument, an instance that fits 32 bits) and builds the client. It
// reports false after printing why.
func (c *connFlags) parsed(fs *flag.FlagSet, stderr io.Writer, verb string) (*wire.Client, bool) {
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", verb, fs.Arg(0))
		return nil, false
	}
	if c.instance > 1<<32-1 {
		fmt.Fprintf(stderr, "%s: --instance %d is out of range\n", verb, c.instance)
		return nil, false
	}
	cl, err := c.client(stderr)
	if err != nil {
		printErrors(stderr, err)
		return nil, false
	}
	return cl, true
}

func clientUsage(fs *flag.FlagSet, w io.Writer, name, what string) func() {
	return func() {
		fmt.Fprintf(w, "usage: registrar-otel %s --service-name S --host H --component C [--instance N] [flags]\n\n", name)
		fmt.Fprintf(w, "%s. Exit status: 0 success, 1 permanent refusal, 75 retryable (RegistrarBusy),\n", what)
		fmt.Fprintln(w, "3 daemon unreachable or not speaking the protocol, 2 usage.")
		fmt.Fprintln(w)
		fs.PrintDefaults()
	}
}

// answer prints a response and maps it to the exit status by class.
func answer(stdout, stderr io.Writer, verb string, asJSON bool, resp *wire.Response, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", verb, err)
		return exitTransport
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
