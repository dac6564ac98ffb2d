package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
)

// handOver runs this test binary's TestHelperActivation as a process
// systemd started by socket activation: the listeners as its descriptors
// 3 and on (LISTEN_FDS), mode saying what it calls. It returns the
// helper's output.
func handOver(t *testing.T, mode, path string, ls ...*net.UnixListener) string {
	t.Helper()
	var files []*os.File
	for _, l := range ls {
		f, err := l.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperActivation$", "-test.count=1")
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), "ACTIVATION_HELPER="+mode, "ACTIVATION_PATH="+path, "LISTEN_FDS="+strconv.Itoa(len(files)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	return string(out)
}

// TestHelperActivation is the socket-activated process of handOver: it
// sets LISTEN_PID to its own pid, as systemd does, and prints what
// CloseActivated or activatedUnix did. It does nothing unless run so.
func TestHelperActivation(t *testing.T) {
	mode := os.Getenv("ACTIVATION_HELPER")
	if mode == "" {
		t.Skip("helper process only")
	}
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	switch mode {
	case "close":
		fmt.Println("CLOSED", CloseActivated())
	case "activated":
		l, err := activatedUnix(os.Getenv("ACTIVATION_PATH"))
		var ke *config.KeyError
		switch {
		case l != nil:
			fmt.Println("LISTENER", l.Addr())
		case errors.As(err, &ke):
			fmt.Println("KEYERROR", ke.Key)
		default:
			fmt.Println("NONE", err)
		}
	}
}

// waiting listens on a unix socket in dir with n connections queued,
// never accepted; it returns the listener and the callers' ends.
func waiting(t *testing.T, dir, name string, n int) (*net.UnixListener, []net.Conn) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var cs []net.Conn
	for range n {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return l, cs
}

// closedUnanswered reports whether c's server end was closed with nothing
// written. The helper has exited, so a connection it took reads its end
// at once; one it left queued stays open in the parent's listener.
func closedUnanswered(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // bounds a wrong answer only
	n, err := c.Read(make([]byte, 1))
	return n == 0 && errors.Is(err, io.EOF)
}

// stillQueued reports whether a connection still waits on l. The deadline
// bounds a wrong answer only: a queued connection is accepted at once.
func stillQueued(t *testing.T, l *net.UnixListener) bool {
	t.Helper()
	_ = l.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := l.Accept()
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// A start that fails before taking the sockets systemd handed over closes
// the connections waiting on each of them, and counts them.
func TestCloseActivatedClosesTheConnectionsWaitingOnEverySocket(t *testing.T) {
	dir := t.TempDir()
	a, ac := waiting(t, dir, "a.sock", 2)
	b, bc := waiting(t, dir, "b.sock", 1)
	if out := handOver(t, "close", "", a, b); !strings.Contains(out, "CLOSED 3\n") {
		t.Fatalf("helper said %q, want CLOSED 3", out)
	}
	for i, c := range append(ac, bc...) {
		if !closedUnanswered(t, c) {
			t.Errorf("caller %d: its connection was not closed", i)
		}
	}
}

// The listener at the configured path is the daemon's, its waiting callers
// left for it; the other sockets handed over are closed. Without one at the
// path the start fails naming registrar.socket_path, and every waiting
// caller is closed.
func TestActivatedUnixTakesTheSocketAtThePathOrFailsClosingTheWaiting(t *testing.T) {
	dir := t.TempDir()
	other, _ := waiting(t, dir, "other.sock", 1)
	mine, _ := waiting(t, dir, "registrar.sock", 1)
	path := filepath.Join(dir, ".", "registrar.sock")
	if out := handOver(t, "activated", path, other, mine); !strings.Contains(out, "LISTENER "+filepath.Join(dir, "registrar.sock")+"\n") {
		t.Fatalf("helper said %q, want the listener at %s", out, path)
	}
	// The helper has exited; a caller it left waiting is still queued on
	// the socket, which the parent (the socket unit) holds.
	for name, l := range map[string]*net.UnixListener{"the daemon's socket": mine, "the other socket": other} {
		if !stillQueued(t, l) {
			t.Errorf("the caller waiting on %s was taken by the helper", name)
		}
	}

	other2, oc2 := waiting(t, dir, "other2.sock", 2)
	if out := handOver(t, "activated", filepath.Join(dir, "missing.sock"), other2); !strings.Contains(out, "KEYERROR registrar.socket_path\n") {
		t.Fatalf("helper said %q, want a KeyError naming registrar.socket_path", out)
	}
	for i, c := range oc2 {
		if !closedUnanswered(t, c) {
			t.Errorf("caller %d of a failed start: its connection was not closed", i)
		}
	}
}
