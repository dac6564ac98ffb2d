package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// troubleshootingMessages produces, from the code that prints them, the
// messages the troubleshooting page quotes. Paths are the package's;
// request ids and uids are replaced by what the page shows.
func troubleshootingMessages(t *testing.T) map[string]string {
	t.Helper()
	const sock = "/run/registrar-otel/registrar.sock"
	const cfgFile = "/etc/registrar-otel/registrar.toml"
	msgs := map[string]string{}
	addr := daemonAddr{socket: sock, fromConfig: cfgFile}
	dial := func(errno error) error {
		return fmt.Errorf("wire: POST /v1/mint on unix socket %s: %w", sock, &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)})
	}
	msgs["no-socket"] = "registrar-otel mint: " + explainTransport(addr, dial(syscall.ENOENT))
	dir := t.TempDir()
	// The client inspects what is at the path: a stale socket (bound, its
	// process gone) and a regular file, at a temporary path shown as the
	// package's.
	stale := filepath.Join(dir, "stale.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: stale}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	regular := filepath.Join(dir, "regular.sock")
	writeFile(t, regular, nil, 0o600)
	at := func(path string, errno error) string {
		a := addr
		a.socket = path
		return strings.ReplaceAll("registrar-otel mint: "+explainTransport(a, dial(errno)), path, sock)
	}
	msgs["stale-socket"] = at(stale, syscall.ECONNREFUSED)
	msgs["not-a-socket-client"] = at(regular, syscall.ECONNREFUSED)

	// serve: something other than a socket at registrar.socket_path.
	notSock := filepath.Join(dir, "run", "registrar.sock")
	if err := os.MkdirAll(filepath.Dir(notSock), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, notSock, nil, 0o600)
	if _, err := server.ListenUnix(notSock); err == nil {
		t.Fatal("ListenUnix on a regular file succeeded")
	} else {
		msgs["not-a-socket-serve"] = strings.ReplaceAll(err.Error(), notSock, sock)
	}
	// serve: an unsafe state directory.
	unsafe := filepath.Join(dir, "state")
	mkdir(t, unsafe, 0o700)
	chmod(t, unsafe, 0o777)
	if _, err := embedded.Open(unsafe, embedded.Options{}); err == nil {
		t.Fatal("Open of a world-writable state dir succeeded")
	} else {
		msgs["unsafe-path"] = strings.ReplaceAll(err.Error(), unsafe, "/var/lib/registrar-otel")
	}
	// serve: a state directory of another uid (the daemon's uid 998, the
	// other's 1001), worded as serve's refusal.
	msgs["unsafe-owner"] = (&embedded.UnsafeStateError{Path: "/var/lib/registrar-otel",
		Problem: (&privdir.UnsafeError{Problem: privdir.Foreign, Owner: 1001, User: 998}).Detail()}).Error()
	// serve: the state database held by another daemon.
	held := filepath.Join(dir, "held")
	b, err := embedded.Open(held, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := embedded.Open(held, embedded.Options{OpenTimeout: 1}); !errors.Is(err, embedded.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	msgs["locked"] = embedded.ErrLocked.Error()
	// config: a misspelt key and a single-underscore variable.
	misspelt := filepath.Join(dir, "misspelt.toml")
	writeFile(t, misspelt, []byte("[registrar]\nrate_limit_admision_burst = 64\n"), 0o600)
	var out, errOut bytes.Buffer
	runConfigCheck([]string{"--config", misspelt}, &out, &errOut)
	msgs["misspelt"] = "registrar.rate_limit_admision_burst is not a known key: a likely misspelling of registrar.rate_limit_admission_burst (the default applies until it is fixed)"
	if !strings.Contains(out.String()+errOut.String(), msgs["misspelt"]) {
		t.Fatalf("config check of a misspelt key does not print %q:\n%s%s", msgs["misspelt"], out.String(), errOut.String())
	}
	// config check (and serve): a socket group the host lacks, named on
	// the page as the package's group.
	const absent = "registrar-callers-absent-test"
	grouped := writeConfigForCheck(t, serveDoc(shortTempDir(t), `socket_group = "`+absent+`"`, ""))
	out.Reset()
	errOut.Reset()
	if code := runConfigCheck([]string{"--config", grouped}, &out, &errOut); code != exitUsage {
		t.Fatalf("config check of an absent socket group: exit %d, want %d\n%s", code, exitUsage, errOut.String())
	}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.HasPrefix(line, "registrar.socket_group ") {
			msgs["unknown-socket-group"] = strings.ReplaceAll(line, absent, "registrar-callers")
		}
	}
	if msgs["unknown-socket-group"] == "" {
		t.Fatalf("config check says nothing of registrar.socket_group:\n%s", errOut.String())
	}
	t.Setenv("REGISTRAR_OTEL_REGISTRAR_SOCKET_PATH", "/tmp/x.sock")
	out.Reset()
	errOut.Reset()
	runConfigCheck(nil, &out, &errOut)
	for _, line := range strings.Split(out.String()+errOut.String(), "\n") {
		if strings.Contains(line, "registrar_socket_path") {
			msgs["single-underscore"] = line
		}
	}
	if msgs["single-underscore"] == "" {
		t.Fatalf("config check says nothing of REGISTRAR_OTEL_REGISTRAR_SOCKET_PATH:\n%s%s", out.String(), errOut.String())
	}
	// mint: the refusals a newcomer meets.
	refusal := func(resp *wire.Response) string {
		var o, e bytes.Buffer
		answer(&o, &e, "mint", addr, false, resp, nil)
		return strings.SplitN(e.String(), "\n", 2)[0]
	}
	msgs["busy"] = refusal(&wire.Response{StatusCode: 429, RequestID: "REQUEST", Class: wire.Retryable, ErrorID: wire.RegistrarBusy, RetryAfter: 1})
	msgs["audit-unwritable"] = refusal(&wire.Response{StatusCode: 503, RequestID: "REQUEST", Class: wire.Permanent, ErrorID: wire.RegistrarUnavailable, Reason: "AuditUnwritable"})
	msgs["backend-unavailable"] = refusal(&wire.Response{StatusCode: 503, RequestID: "REQUEST", Class: wire.Permanent, ErrorID: wire.RegistrarUnavailable, Reason: "BackendUnavailable"})
	// backup by another user.
	var e bytes.Buffer
	ae := &wire.AdminError{StatusCode: 403, ID: wire.AdminForbidden, Detail: "backup is allowed only for the daemon's uid 998 or root; the caller is uid 1000"}
	fmt.Fprintf(&e, "registrar-otel backup: %s (HTTP %d)", ae.Error(), ae.StatusCode)
	msgs["admin-forbidden"] = e.String()
	// Which server the commands trust (issue 41): another user's, and one a
	// user namespace does not map.
	msgs["server-not-trusted"] = "registrar-otel backup: " + explainTransport(daemonAddr{socket: sock},
		&wire.ServerNotTrustedError{Socket: sock, UID: 1001, Trusted: []uint32{998}})
	msgs["server-unmapped"] = "registrar-otel backup: " + explainTransport(daemonAddr{socket: sock},
		&wire.ServerNotTrustedError{Socket: sock, UID: 65534, Unmapped: true})
	return msgs
}

// TestTroubleshootingQuotesEveryMessageExactly: each message the page
// explains is quoted there, in both languages, exactly as the binary
// prints it (first line; with the package's paths).
func TestTroubleshootingQuotesEveryMessageExactly(t *testing.T) {
	msgs := troubleshootingMessages(t)
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "troubleshooting.md"))
		if err != nil {
			t.Fatal(err)
		}
		for key, m := range msgs {
			for _, line := range strings.Split(m, "\n") {
				if !strings.Contains(string(raw), strings.TrimSpace(line)) {
					t.Errorf("docs/%s/troubleshooting.md does not quote (%s):\n  %s", lang, key, line)
				}
			}
		}
	}
}
