package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/daemon"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
)

func TestServeExitsTwoForEveryErrorARestartCannotFix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string) (registrarExtra, rest string)
		want    string // in the error output
	}{
		{"a group-writable state_dir", func(t *testing.T, dir string) (string, string) {
			mkdirMode(t, filepath.Join(dir, "lib"), 0o770)
			return "", ""
		}, "registrar.state_dir"},
		{"a group-writable audit_record_dir", func(t *testing.T, dir string) (string, string) {
			mkdirMode(t, filepath.Join(dir, "audit"), 0o777)
			return "", ""
		}, "registrar.audit_record_dir"},
		{"a regular file at the socket path", func(t *testing.T, dir string) (string, string) {
			mkdirMode(t, filepath.Join(dir, "run"), 0o700)
			writeFile(t, filepath.Join(dir, "run", "r.sock"), nil, 0o600)
			return "", ""
		}, "is not a socket"},
		{"a metrics port in use", func(t *testing.T, dir string) (string, string) {
			l := listenLocal(t)
			return "", fmt.Sprintf("metrics_listen = %q\n", l.Addr())
		}, "telemetry.metrics_listen"},
		{"a missing TLS certificate file", func(t *testing.T, dir string) (string, string) {
			return tlsLines(dir, "127.0.0.1:0"), ""
		}, "registrar.tls_listen"},
		{"a bad TLS certificate", func(t *testing.T, dir string) (string, string) {
			for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
				writeFile(t, filepath.Join(dir, f), []byte("not PEM\n"), 0o600)
			}
			return tlsLines(dir, "127.0.0.1:0"), ""
		}, "tls_cert_file"},
		{"a TLS port in use", func(t *testing.T, dir string) (string, string) {
			l := listenLocal(t)
			writeTestPKI(t, dir)
			return tlsLines(dir, l.Addr().String()), ""
		}, "address already in use"},
		{"an unreadable token file", func(t *testing.T, dir string) (string, string) {
			tok := filepath.Join(dir, "token")
			mkdir(t, tok, 0o700) // a directory: no token to read
			return `backend = "openbao"`, fmt.Sprintf("[openbao]\naddress = \"https://127.0.0.1:1\"\ntoken_file = %q\n", tok)
		}, "openbao.token_file"},
		{"an unknown socket group", func(t *testing.T, dir string) (string, string) {
			return `socket_group = "no-such-group-registrar-test"`, ""
		}, "registrar.socket_group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortTempDir(t)
			extra, rest := tc.prepare(t, dir)
			path := writeConfig(t, dir, serveDoc(dir, extra, rest), 0o600)
			var out, errb bytes.Buffer
			if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage {
				t.Fatalf("serve exited %d, want %d:\n%s", code, exitUsage, errb.String())
			}
			// Refused by the daemon at start (a *daemon.SetupError), not
			// by the configuration's loading.
			if !strings.Contains(errb.String(), "cannot start") || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("serve's error does not name %q:\n%s", tc.want, errb.String())
			}
		})
	}
}

func TestServeExitsOneForARuntimeFailureAndTwoForASetupError(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	if got := serveExit(logger, errors.New("daemon: serving r.sock: accept: too many open files")); got != exitFailure {
		t.Errorf("a runtime failure: exit %d, want %d", got, exitFailure)
	}
	if got := serveExit(logger, fmt.Errorf("wrapped: %w", &daemon.SetupError{Err: errors.New("x")})); got != exitUsage {
		t.Errorf("a setup error: exit %d, want %d", got, exitUsage)
	}
}

func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, mode)
}

// writeFile writes data to path with mode, failing the test when it
// cannot.
func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

// mkdir makes the directory dir with mode, failing the test when it
// cannot.
func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// chmod sets path's mode (the umask does not apply to it), failing the
// test when it cannot.
func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// needRoot skips the test unless it runs as root, saying why it needs to.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

// mkdirOwned makes dir with mode, owned by uid (and its gid = uid), and
// returns it: a directory of another user, for the owner rules (root only).
func mkdirOwned(t *testing.T, dir string, mode os.FileMode, uid int) string {
	t.Helper()
	mkdir(t, dir, mode)
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tlsLines(dir, addr string) string {
	return tlsListenLines(addr, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"))
}

// writeTestPKI writes a valid server certificate, key and client CA as
// tlsLines names them.
func writeTestPKI(t *testing.T, dir string) {
	t.Helper()
	caFile, certFile, keyFile := pkitest.New(t).ServerFiles(t)
	for src, dst := range map[string]string{caFile: "ca.crt", certFile: "tls.crt", keyFile: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, dst), b, 0o600)
	}
}
