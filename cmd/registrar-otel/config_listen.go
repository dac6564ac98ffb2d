package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// bindProbe tries to listen on addr and closes the listener at once. The
// in-process tests replace it (TestMain), so a daemon another test or
// session runs on the default metrics port does not change their output;
// the binary's tests use the real one.
var bindProbe = func(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// probeTimeout bounds each probe of a running daemon.
const probeTimeout = time.Second

// note records a finding that is a warning, or an error under --strict.
func (r *checkResult) note(key, format string, args ...any) {
	if r.Strict {
		r.errorf(key, format+" (--strict)", args...)
		return
	}
	r.warnf(key, format, args...)
}

// checkKeyMode warns about a TLS private key its group or others may read:
// serve accepts it, and anyone in that group can impersonate the daemon.
func checkKeyMode(res *checkResult, cfg *config.Config) {
	r := &cfg.Registrar
	if r.TLSListen == "" || r.TLSKeyFile == "" {
		return
	}
	fi, err := os.Stat(r.TLSKeyFile)
	if err != nil {
		return // reported by checkTLS
	}
	if perm := fi.Mode().Perm(); perm&0o044 != 0 {
		who := "its group"
		switch {
		case perm&0o004 != 0 && perm&0o040 != 0:
			who = "its group and every user"
		case perm&0o004 != 0:
			who = "every user"
		}
		res.note("registrar.tls_key_file", "registrar.tls_key_file %s is readable by %s (mode %04o): a private key should be readable by the daemon's user only; run 'chmod 600 %s'",
			describePath(r.TLSKeyFile, false), who, perm, r.TLSKeyFile)
	}
}

// checkListen tries to bind each TCP address serve would listen on, so a
// taken port is found before serve fails on it, and says when the holder
// is a running registrar-otel (its /metrics answers, or its socket does).
// Judged for another user than the one running the check, a privileged
// port is an error: that user cannot bind it (the shipped unit grants no
// capability), whatever the probe, run as root, could.
func checkListen(res *checkResult, cfg *config.Config, j *judgedFor) {
	for _, l := range []struct{ key, addr string }{
		{"registrar.tls_listen", cfg.Registrar.TLSListen},
		{"telemetry.metrics_listen", cfg.Telemetry.MetricsListen},
	} {
		if l.addr == "" {
			continue
		}
		if port, start, ok := privilegedPort(l.addr); ok && !j.self && !j.root() && !j.ambientCap("CAP_NET_BIND_SERVICE") {
			res.errorf(l.key, "%s %s: serve, running as %s, could not listen there: port %d is privileged (below net.ipv4.ip_unprivileged_port_start, %d) and the user has no CAP_NET_BIND_SERVICE; choose a port from %d up",
				l.key, l.addr, j.who(), port, start, start)
			continue
		}
		err := bindProbe(l.addr)
		if err == nil {
			continue
		}
		cause := unwrapOp(err)
		why := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			why = "; " + holder(cfg, l.key, l.addr)
		}
		res.note(l.key, "%s %s: serve could not listen there: %v%s", l.key, l.addr, cause, why)
	}
}

// holder says who likely holds addr.
func holder(cfg *config.Config, key, addr string) string {
	if key == "telemetry.metrics_listen" {
		c := &http.Client{Timeout: probeTimeout}
		if resp, err := c.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if strings.Contains(string(b), "registrar_build_info") {
				return "a running registrar-otel daemon holds it (its /metrics answers there): stop it first, or give this configuration another address"
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if _, err := wire.NewUnixClient(cfg.Registrar.SocketPath, wire.WithTimeout(probeTimeout)).Health(ctx); err == nil {
		return fmt.Sprintf("a registrar-otel daemon is running on registrar.socket_path %s and likely holds it: stop it first, or give this configuration another address", describePath(cfg.Registrar.SocketPath, false))
	}
	return "another process holds it (see 'ss -ltnp'); choose a free address"
}

// privilegedPort reports whether addr's port is one only a process with
// CAP_NET_BIND_SERVICE may bind: below net.ipv4.ip_unprivileged_port_start
// (1024 unless the host lowered it), port 0 (any free port) aside.
func privilegedPort(addr string) (port, start int, ok bool) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, 0, false
	}
	port, err = strconv.Atoi(p)
	if err != nil || port == 0 {
		return 0, 0, false
	}
	start = 1024
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			start = n
		}
	}
	return port, start, port < start
}
