// Package vaulttest starts and stops a real Vault server on loopback for the
// openbao backend's integration tests: `vault server -dev` (in memory), a
// server with integrated storage that survives a kill and a restart, or a
// raft cluster of several such servers formed through retry_join
// (StartCluster), whose leader a test kills. The binary
// is the one `make vault` builds (var/tools/vault/bin/vault) or
// $REGISTRAR_TEST_VAULT_BIN; where it is absent the tests skip with a
// message saying how to build it, unless $REGISTRAR_TEST_REQUIRE_VAULT is
// set (CI), when they fail.
//
// Readiness is read from the server's own log lines, never waited for with
// a sleep. Every server is killed when its test ends. It is for tests only;
// a Server is safe for use by one test goroutine at a time.
package vaulttest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// EnvBinary overrides the binary's path.
const EnvBinary = "REGISTRAR_TEST_VAULT_BIN"

// EnvRequire makes an absent binary a test failure instead of a skip.
const EnvRequire = "REGISTRAR_TEST_REQUIRE_VAULT"

// startTimeout bounds how long a server may take to log that it is ready.
const startTimeout = 90 * time.Second

// Binary returns the vault binary's path and whether it exists.
func Binary() (string, bool) {
	if p := os.Getenv(EnvBinary); p != "" {
		_, err := os.Stat(p)
		return p, err == nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", false
	}
	p := filepath.Join(root, "var", "tools", "vault", "bin", "vault")
	st, err := os.Stat(p)
	return p, err == nil && st.Mode().IsRegular()
}

// Require returns the binary's path, or skips t (fails it under
// $REGISTRAR_TEST_REQUIRE_VAULT) with a message naming `make vault`.
func Require(t testing.TB) string {
	t.Helper()
	p, ok := Binary()
	if ok {
		return p
	}
	msg := fmt.Sprintf("the Vault server binary is not built (%s): run `make vault` (the small test server of tools/vault, about 5 minutes cold) to run the openbao integration tests", p)
	if os.Getenv(EnvRequire) != "" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED: " + msg)
	return ""
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/registrar-otel/registrar-otel\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vaulttest: not inside the registrar-otel module")
		}
		dir = parent
	}
}

// Server is one running (or stopped) Vault server.
type Server struct {
	// Addr is the server's URL, http://127.0.0.1:PORT.
	Addr string
	// RootToken is a root token.
	RootToken string

	t         testing.TB
	bin       string
	dir       string
	listen    string
	dev       bool
	unsealKey string

	cmd  *exec.Cmd
	out  *lineLog
	done chan struct{} // closed when the process has exited
}

// StartDev starts `vault server -dev` on a free loopback port with a random
// root token and the AppRole auth method enabled at approle/ (-dev mounts
// KV version 2 at secret/).
func StartDev(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, true)
	s.start()
	s.enableAppRole()
	return s
}

// StartPersistent starts a server with integrated (raft) storage under t.TempDir(),
// initialises it with one unseal key, unseals it, and mounts KV version 2
// at secret/ and AppRole at approle/. Stop and Restart keep its data.
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, false)
	// Integrated (raft) storage: crash-safe under SIGKILL, as a production
	// OpenBao is. (The "file" backend writes through temporary files that a
	// kill can leave behind, and then lists them as keys.)
	cluster := freeLoopbackAddr(t)
	s.writeRaftConfig("vaultdev", "", cluster)
	s.start()
	c := s.client("")
	init, err := c.Sys().Init(&api.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		s.fatalf("sys/init: %v", err)
	}
	s.RootToken, s.unsealKey = init.RootToken, init.KeysB64[0]
	s.unseal()
	root := s.Client()
	if err := root.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		s.fatalf("mounting KV v2 at secret/: %v", err)
	}
	s.enableAppRole()
	s.waitForKV()
	return s
}

// writeRaftConfig writes the server's configuration file: raft storage in
// its directory as node nodeID (storageExtra: more lines of the storage
// stanza, such as retry_join), one plain-HTTP listener, and cluster as its
// cluster address.
func (s *Server) writeRaftConfig(nodeID, storageExtra, cluster string) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Join(s.dir, "raft"), 0o700); err != nil {
		s.t.Fatal(err)
	}
	cfg := fmt.Sprintf(`storage "raft" {
  path    = %q
  node_id = %q
%s}
listener "tcp" {
  address         = %q
  cluster_address = %q
  tls_disable     = true
}
api_addr      = %q
cluster_addr  = %q
disable_mlock = true
ui            = false
`, filepath.Join(s.dir, "raft"), nodeID, storageExtra, s.listen, cluster, s.Addr, "http://"+cluster)
	if err := os.WriteFile(filepath.Join(s.dir, "server.hcl"), []byte(cfg), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func newServer(t testing.TB, dev bool) *Server {
	t.Helper()
	bin := Require(t)
	listen := freeLoopbackAddr(t)
	s := &Server{t: t, bin: bin, dir: t.TempDir(), listen: listen, Addr: "http://" + listen, dev: dev}
	if dev {
		s.RootToken = randomToken(t)
	}
	t.Cleanup(func() { s.kill() })
	return s
}

func randomToken(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "root-" + hex.EncodeToString(b[:])
}

// freeLoopbackAddr returns a 127.0.0.1 port nobody listens on right now.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func (s *Server) start() {
	s.t.Helper()
	var args []string
	if s.dev {
		args = []string{"server", "-dev", "-dev-root-token-id=" + s.RootToken, "-dev-listen-address=" + s.listen, "-dev-no-store-token"}
	} else {
		args = []string{"server", "-config=" + filepath.Join(s.dir, "server.hcl")}
	}
	cmd := exec.Command(s.bin, args...)
	// A clean environment: no inherited VAULT_*/BAO_* settings, and a HOME
	// of the test's own.
	cmd.Env = []string{"HOME=" + s.dir, "PATH=/usr/bin:/bin", "VAULT_LOG_LEVEL=info"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	logFile, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	s.out = newLineLog(pr, logFile)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	s.waitLog("Vault server started!")
}

// waitLog waits until the server has logged a line containing substr.
func (s *Server) waitLog(substr string) {
	s.t.Helper()
	if err := s.out.wait(substr, s.done, startTimeout); err != nil {
		s.fatalf("waiting for %q in the server's log: %v", substr, err)
	}
}

func (s *Server) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("vaulttest: "+format+"\nlast lines of the server's log:\n%s", append(args, s.out.tail(30))...)
}

func (s *Server) unseal() {
	s.t.Helper()
	mark := s.out.count()
	st, err := s.client("").Sys().Unseal(s.unsealKey)
	if err != nil || st.Sealed {
		s.fatalf("unsealing: %v (status %+v)", err, st)
	}
	if err := s.out.waitAfter(mark, "post-unseal setup complete", s.done, startTimeout); err != nil {
		s.fatalf("waiting for the unseal to complete: %v", err)
	}
	s.waitActive()
}

// waitActive waits until the server answers as the active node: a raft
// server's log says "post-unseal setup complete" at sys/init too, and a
// log read behind under load can show that line after the unseal's mark,
// while the unsealed node is still electing itself (every write then
// answers 500 "local node not active"). Each retry waits for the server's
// next log line, not for a fixed time.
func (s *Server) waitActive() {
	s.t.Helper()
	c := s.client("")
	var last string
	for range 50 {
		mark := s.out.count()
		lr, err := c.Sys().Leader()
		if err == nil && (!lr.HAEnabled || lr.IsSelf) {
			return
		}
		last = fmt.Sprintf("%+v, %v", lr, err)
		_ = s.out.waitAfter(mark, "", s.done, 5*time.Second)
	}
	s.fatalf("the unsealed server never became the active node: sys/leader %s", last)
}

// Seal seals the server (sys/seal with the root token): every request then
// answers 503 until Unseal.
func (s *Server) Seal() {
	s.t.Helper()
	if err := s.Client().Sys().Seal(); err != nil {
		s.fatalf("sealing: %v", err)
	}
}

// Unseal unseals a server sealed by Seal. Only a StartPersistent server
// has the unseal key.
func (s *Server) Unseal() {
	s.t.Helper()
	if s.unsealKey == "" {
		s.fatalf("Unseal: a dev server's unseal key is not kept; use StartPersistent")
	}
	s.unseal()
}

func (s *Server) enableAppRole() {
	s.t.Helper()
	if err := s.Client().Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"}); err != nil {
		s.fatalf("enabling AppRole: %v", err)
	}
}

// waitForKV writes and reads a probe secret: a KV v2 mount just created may
// answer "upgrading" for a moment. Each retry waits for the server's next
// log line, not for a fixed time.
func (s *Server) waitForKV() {
	s.t.Helper()
	kv := s.Client().KVv2("secret")
	var err error
	for range 20 {
		mark := s.out.count()
		if _, err = kv.Put(context.Background(), "vaultdev-probe", map[string]any{"ok": "1"}); err == nil {
			return
		}
		_ = s.out.waitAfter(mark, "", s.done, 5*time.Second)
	}
	s.fatalf("the KV v2 mount never became writable: %v", err)
}

// Client returns a client for the server with the root token. It reads no
// environment variable.
func (s *Server) Client() *api.Client { return s.client(s.RootToken) }

func (s *Server) client(token string) *api.Client {
	s.t.Helper()
	cfg := api.NewConfig()
	cfg.Address = s.Addr
	cfg.MaxRetries = 0
	cfg.Timeout = 30 * time.Second
	c, err := api.NewClient(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	c.SetToken(token)
	return c
}

// Kill stops the server at once with SIGKILL, as a crash or a power cut
// would, and waits for it to exit.
func (s *Server) Kill() {
	s.t.Helper()
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Restart starts a stopped persistent server again on the same address
// with the same storage, and unseals it.
func (s *Server) Restart() {
	s.t.Helper()
	if s.dev {
		s.t.Fatal("vaulttest: a -dev server keeps nothing to restart with")
	}
	if s.cmd != nil {
		s.t.Fatal("vaulttest: Restart of a running server")
	}
	s.start()
	s.unseal()
}

// Log returns the server's output so far.
func (s *Server) Log() string { return s.out.tail(0) }

// lineLog collects a process's output lines and lets tests wait for one.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
}

func newLineLog(r io.Reader, copyTo io.WriteCloser) *lineLog {
	l := &lineLog{changed: make(chan struct{})}
	go func() {
		defer copyTo.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(copyTo, line)
			l.mu.Lock()
			l.lines = append(l.lines, line)
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return l
}

func (l *lineLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *lineLog) wait(substr string, exited <-chan struct{}, timeout time.Duration) error {
	return l.waitAfter(0, substr, exited, timeout)
}

// waitAfter waits for a line after the first `from` lines that contains
// substr ("" matches any line).
func (l *lineLog) waitAfter(from int, substr string, exited <-chan struct{}, timeout time.Duration) error {
	return l.waitAfterStop(from, substr, exited, timeout, nil)
}

// waitAfterAny waits for a line after the first `from` lines that contains
// one of substrs.
func (l *lineLog) waitAfterAny(from int, substrs []string, exited <-chan struct{}, timeout time.Duration) error {
	return l.waitMatch(from, func(line string) bool {
		for _, s := range substrs {
			if strings.Contains(line, s) {
				return true
			}
		}
		return false
	}, exited, timeout, nil)
}

// waitAfterStop is waitAfter that also gives up when stop is closed.
func (l *lineLog) waitAfterStop(from int, substr string, exited <-chan struct{}, timeout time.Duration, stop <-chan struct{}) error {
	return l.waitMatch(from, func(line string) bool { return strings.Contains(line, substr) }, exited, timeout, stop)
}

func (l *lineLog) waitMatch(from int, match func(string) bool, exited <-chan struct{}, timeout time.Duration, stop <-chan struct{}) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.lines); i++ {
			if match(l.lines[i]) {
				l.mu.Unlock()
				return nil
			}
		}
		from = len(l.lines)
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-exited:
			return errors.New("the server exited")
		case <-timer.C:
			return fmt.Errorf("not logged within %s", timeout)
		case <-stop:
			return errors.New("stopped")
		}
	}
}

func (l *lineLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
