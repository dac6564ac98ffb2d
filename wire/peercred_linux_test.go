//go:build linux

package wire

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
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
