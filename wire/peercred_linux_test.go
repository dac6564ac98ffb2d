//go:build linux

package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServerEnv names the socket the test binary, re-run as another uid,
// serves on (TestHelperForeignServer).
const fakeServerEnv = "WIRE_TEST_FOREIGN_SERVER"

// TestHelperForeignServer is not a test: run by foreignServer as another
// uid, it answers every request on the socket fakeServerEnv names with 200
// and the body "forged", and writes one line to stdout per request, until
// its stdin closes.
func TestHelperForeignServer(t *testing.T) {
	path := os.Getenv(fakeServerEnv)
	if path == "" {
		t.Skip("run by foreignServer only")
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("request", r.URL.Path)
		io.WriteString(w, "forged")
	}))
}

// foreignServer runs a server as uid on a socket in dir (which that uid
// may write; its parent, base, a directory uid may read) and returns its
// socket and a function that waits, up to a deadline, until the server
// has got want requests in all and returns their paths.
func foreignServer(t *testing.T, base, dir string, uid int) (socket string, requests func(want int) []string) {
	t.Helper()
	socket = filepath.Join(dir, "registrar.sock")
	// The test binary where uid may run it (go test builds it in a
	// directory only its user reads).
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "wire.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperForeignServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), fakeServerEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "ready" {
			t.Fatalf("the foreign server: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the foreign server did not start")
	}
	var got []string
	return socket, func(want int) []string {
		deadline := time.After(10 * time.Second)
		for len(got) < want {
			select {
			case l, ok := <-lines:
				if !ok {
					return got
				}
				if p, found := strings.CutPrefix(l, "request "); found {
					got = append(got, p)
				}
			case <-deadline:
				return got
			}
		}
		return got
	}
}

// unusedUID is a uid no account has, for the foreign server.
func unusedUID(t *testing.T) int {
	t.Helper()
	for id := 61100; id < 62000; id++ {
		if _, err := user.LookupId(strconv.Itoa(id)); err != nil {
			return id
		}
	}
	t.Skip("no unused uid in 61100-61999")
	return 0
}

// Issue 41: a server another user runs where the client looks (here, a
// shared sticky directory that root owns) is refused before anything is
// sent, naming its uid; trusted by WithServerUIDs, or as the owner of
// the socket's directory, it is spoken to.
func TestTheClientRefusesAServerRunByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the foreign server runs as another uid")
	}
	uid := unusedUID(t)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o1777) // past the umask
	socket, requests := foreignServer(t, base, shared, uid)
	ctx := context.Background()

	_, err := NewUnixClient(socket, WithTimeout(10*time.Second)).Health(ctx)
	var nt *ServerNotTrustedError
	if !errors.As(err, &nt) || nt.UID != uint32(uid) || nt.Socket != socket {
		t.Fatalf("a server of uid %d in a directory root owns: %v, want a *ServerNotTrustedError naming the uid", uid, err)
	}
	if !strings.Contains(err.Error(), "uid "+strconv.Itoa(uid)) {
		t.Errorf("the error %q does not name the server's uid", err)
	}
	var buf strings.Builder
	if _, err := NewUnixClient(socket, WithServerUIDs(4242)).Backup(ctx, &buf); !errors.As(err, &nt) || buf.Len() != 0 {
		t.Fatalf("a backup from an untrusted server: %v, %d bytes written; want refused, nothing written", err, buf.Len())
	}

	// Trusted by name, then as the owner of the socket's directory: spoken
	// to (its answers are not the protocol's, which is another error, but
	// the requests reach it). They are reloads: a request of the refused
	// calls (health, backup) would be seen before them.
	NewUnixClient(socket, WithServerUIDs(uint32(uid)), WithTimeout(10*time.Second)).Reload(ctx)
	if err := os.Chown(shared, uid, uid); err != nil {
		t.Fatal(err)
	}
	NewUnixClient(socket, WithTimeout(10*time.Second)).Reload(ctx)
	if got := requests(2); len(got) != 2 || got[0] != PathReload || got[1] != PathReload {
		t.Fatalf("the server got %q, want the two trusted reloads (%s) and none of the refused calls", got, PathReload)
	}
}
