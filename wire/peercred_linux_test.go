//go:build linux

package wire

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/peertest"
)

func TestMain(m *testing.M) {
	peertest.ServeIfAsked() // the test binary as another user's server
	os.Exit(m.Run())
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
	socket := filepath.Join(shared, "registrar.sock")
	requests := peertest.Start(t, bin, socket, uid)
	ctx := context.Background()

	_, err = NewUnixClient(socket, WithTimeout(10*time.Second)).Health(ctx)
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

// The uid map decides whether a reported overflow uid is a real uid: in
// the initial namespace every uid is mapped; in a namespace that maps a
// few, the rest are not, and malformed or unreadable maps map nothing.
func TestUserNamespaceMaps(t *testing.T) {
	cases := []struct {
		name   string
		uidMap string
		uid    uint32
		want   bool
	}{
		{"initial namespace", "         0          0 4294967295\n", 65534, true},
		{"initial namespace, the last uid", "0 0 4294967295\n", 4294967294, true},
		{"one uid mapped, another asked", "0 100000 1\n", 65534, false},
		{"the uid at a range's start", "65534 100000 1\n", 65534, true},
		{"the uid just past a range", "65000 100000 534\n", 65534, false},
		{"the second range", "0 1000 1\n1 100000 65536\n", 65534, true},
		{"empty (unreadable)", "", 65534, false},
		{"malformed", "0 0\n", 65534, false},
		{"not numbers", "a b c\n", 65534, false},
	}
	for _, tc := range cases {
		if got := (userNS{overflow: 65534, uidMap: []byte(tc.uidMap)}).maps(tc.uid); got != tc.want {
			t.Errorf("%s: maps(%d) = %v, want %v", tc.name, tc.uid, got, tc.want)
		}
	}
	ns := userNamespace()
	if unmappedUID(ns.overflow) == ns.maps(ns.overflow) {
		t.Errorf("unmappedUID(%d) = %v, but this namespace's map says mapped = %v", ns.overflow, unmappedUID(ns.overflow), ns.maps(ns.overflow))
	}
}

// The overflow uid and the uid map are the kernel's files: an overflow
// uid that cannot be read or parsed is 65534, a uid map that cannot be
// read maps nothing; in the process's own namespace, its own map is read.
func TestUserNamespaceIsReadFromTheKernelsFiles(t *testing.T) {
	const overflowFile, mapFile = "/proc/sys/kernel/overflowuid", "/proc/self/uid_map"
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if b, ok := m[name]; ok {
				return []byte(b), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		overflow uint32
		uidMap   string
	}{
		{"both read", map[string]string{overflowFile: "4000\n", mapFile: "0 100000 65536\n"}, 4000, "0 100000 65536\n"},
		{"an overflow uid that is not a number", map[string]string{overflowFile: "x\n", mapFile: "0 0 1\n"}, 65534, "0 0 1\n"},
		{"an overflow uid past 32 bits", map[string]string{overflowFile: "4294967296\n"}, 65534, ""},
		{"neither readable", nil, 65534, ""},
	} {
		ns := readUserNS(files(tc.files))
		if ns.overflow != tc.overflow || string(ns.uidMap) != tc.uidMap || (tc.uidMap == "") != (ns.uidMap == nil) {
			t.Errorf("%s: overflow %d, uid map %q; want %d, %q", tc.name, ns.overflow, ns.uidMap, tc.overflow, tc.uidMap)
		}
	}
	if b, err := os.ReadFile(mapFile); err == nil {
		if got := userNamespace().uidMap; string(got) != string(b) {
			t.Errorf("this process's uid map read as %q, want %q", got, b)
		}
	}
}

// Inside a user namespace that does not map the daemon's uid, the kernel
// reports the server and the directories' owners as the overflow uid, as
// it would any other unmapped user's process: in a directory others may
// write (a shared one, as /tmp) the client cannot tell the real daemon
// from a stranger, and refuses it with the reason; in a directory only
// its owner writes, it judges as outside the namespace and talks. The
// servers run as root outside; the client is this test binary in a new
// user namespace mapping one unused uid as its root.
func TestTheClientRefusesAServerItsUserNamespaceDoesNotMap(t *testing.T) {
	if shared := os.Getenv("WIRE_TEST_UNMAPPED_SHARED"); shared != "" {
		ns := userNamespace()
		_, err := NewUnixClient(shared, WithTimeout(10*time.Second)).Health(context.Background())
		var nt *ServerNotTrustedError
		if !errors.As(err, &nt) || !nt.Unmapped || nt.UID != ns.overflow {
			t.Fatalf("from inside the namespace, a shared directory: %v; want a *ServerNotTrustedError, unmapped, uid %d", err, ns.overflow)
		}
		if !strings.Contains(err.Error(), "does not map") || !strings.Contains(err.Error(), "outside the user namespace") {
			t.Errorf("the error %q does not say why", err)
		}
		_, err = NewUnixClient(os.Getenv("WIRE_TEST_UNMAPPED_OWN"), WithTimeout(10*time.Second)).Health(context.Background())
		if errors.As(err, &nt) {
			t.Fatalf("from inside the namespace, a directory only its owner writes: %v; want it spoken to", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the client runs in a user namespace root makes")
	}
	uid := unusedUID(t)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "wire.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	serve := func(dir string, mode os.FileMode) string {
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		socket := filepath.Join(dir, "registrar.sock")
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if err := os.Chmod(socket, 0o777); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return socket
	}
	shared := serve(filepath.Join(base, "shared"), 0o1777)
	own := serve(filepath.Join(base, "run"), 0o755)
	// From outside, both servers are root's, and trusted.
	for _, socket := range []string{shared, own} {
		if _, err := NewUnixClient(socket, WithTimeout(10*time.Second)).Health(context.Background()); errors.As(err, new(*ServerNotTrustedError)) {
			t.Fatalf("outside any user namespace, %s: %v", socket, err)
		}
	}
	before := reached.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestTheClientRefusesAServerItsUserNamespaceDoesNotMap$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "WIRE_TEST_UNMAPPED_SHARED="+shared, "WIRE_TEST_UNMAPPED_OWN="+own)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		// Root inside the namespace: on the host, the mapped uid.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
	}
	out, err := cmd.CombinedOutput()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Skipf("cannot start a process in a new user namespace here: %v", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTheClientRefusesAServerItsUserNamespaceDoesNotMap") {
		t.Fatalf("the client in the user namespace: %v\n%s", err, out)
	}
	if got := reached.Load() - before; got != 1 {
		t.Errorf("the servers got %d requests from inside the namespace, want 1: the one in the directory only its owner writes", got)
	}
}
