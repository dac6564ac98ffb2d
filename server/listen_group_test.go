package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestListenUnixGroupSharesTheSocketWithTheGroupOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown to another group")
	}
	const gid = 61999 // any gid: chown as root needs no group entry
	g := SocketGroup{Name: "callers", GID: gid}
	base, err := os.MkdirTemp("", "wg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)

	// A missing directory is created 0750 in the group; the socket 0660.
	path := filepath.Join(base, "run", "r.sock")
	l, err := ListenUnixGroup(path, g)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o750, path: 0o660} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || fi.Sys().(*syscall.Stat_t).Gid != gid {
			t.Errorf("%s: mode %v group %d, want %v and %d", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
	l.Close()

	// An existing 0700 directory does not let the group in: refused.
	closed := filepath.Join(base, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnixGroup(filepath.Join(closed, "r.sock"), g); !errors.Is(err, ErrSocketGroup) {
		t.Fatalf("socket in a 0700 directory with a group: %v, want ErrSocketGroup", err)
	}
	// Without a group nothing changes: 0600.
	l, err = ListenUnix(filepath.Join(closed, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, _ := os.Lstat(filepath.Join(closed, "r.sock")); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket without a group: mode %v, want 0600", fi.Mode().Perm())
	}
}
