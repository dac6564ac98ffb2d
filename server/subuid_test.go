package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/subid"
	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// identityVerbs answers every mint first_mint and records each caller
// identity the server passed.
type identityVerbs struct {
	mu      sync.Mutex
	ids     []string
	subuids []uint32
}

func (v *identityVerbs) Mint(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
	v.mu.Lock()
	v.ids = append(v.ids, req.CallerIdentity)
	v.subuids = append(v.subuids, req.CallerSubuid)
	v.mu.Unlock()
	return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint,
		Material: registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: time.Now().Add(time.Minute)}}, nil
}

func (v *identityVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return registrar.DeregisterResult{}, fmt.Errorf("unused")
}

// last is the last call's identity and subordinate uid.
func (v *identityVerbs) last() (string, uint32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.ids) == 0 {
		return "", 0
	}
	return v.ids[len(v.ids)-1], v.subuids[len(v.subuids)-1]
}

// TestTheKernelsPeerUidIsMappedToItsRangeOwner runs this test binary as
// uids of a subordinate range and beside it, each minting once over a real
// unix socket: SO_PEERCRED reports the uid, the server maps it. Needs root
// (to run a process as those uids).
func TestTheKernelsPeerUidIsMappedToItsRangeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run callers as subordinate uids")
	}
	v := &identityVerbs{}
	s, err := server.New(server.Options{Verbs: v, Health: fixedHolder(t, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := subid.Parse(strings.NewReader("1000:100000:10\n"), subid.LookupUser)
	if err != nil {
		t.Fatal(err)
	}
	s.SetSubordinateUIDs(m)
	dir, err := os.MkdirTemp("", "subuid-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, l)
	bin := copyExecutable(t)

	for _, c := range []struct {
		uid    uint32
		want   string
		subuid uint32 // the diagnostic the verbs get
	}{
		{100000, "unix-peer:uid=1000", 100000},
		{100009, "unix-peer:uid=1000", 100009},
		{100010, "unix-peer:uid=100010", 0},
		{99999, "unix-peer:uid=99999", 0},
	} {
		mintAs(t, bin, path, c.uid)
		if got, sub := v.last(); got != c.want || sub != c.subuid {
			t.Errorf("uid %d called as %q with CallerSubuid %d, want %q and %d", c.uid, got, sub, c.want, c.subuid)
		}
	}
	// Taken away (a reload without the range): the next connection is
	// the uid itself.
	s.SetSubordinateUIDs(nil)
	mintAs(t, bin, path, 100000)
	if got, sub := v.last(); got != "unix-peer:uid=100000" || sub != 0 {
		t.Errorf("without ranges, uid 100000 called as %q with CallerSubuid %d, want itself and none", got, sub)
	}
}

// mintAs runs bin as uid to mint once over the socket at path.
func mintAs(t *testing.T, bin, path string, uid uint32) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestHelperSubuidMint$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SUBUID_HELPER_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cmd.WaitDelay = ioDeadline
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("caller as uid %d: %v\n%s", uid, err, out)
	}
}

// TestHelperSubuidMint is the caller of mintAs; it does nothing unless run
// by it.
func TestHelperSubuidMint(t *testing.T) {
	path := os.Getenv("SUBUID_HELPER_SOCKET")
	if path == "" {
		t.Skip("helper process only")
	}
	c := wire.NewUnixClient(path, wire.WithTimeout(ioDeadline))
	defer c.CloseIdleConnections()
	res, err := c.Mint(context.Background(), wiretest.GoodMint())
	if err != nil || !res.OK() {
		t.Fatalf("mint: %v %+v", err, res)
	}
}
