package server_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/server"
)

func TestListenUnixMakesDirectory0700AndSocket0600(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "run")
	path := filepath.Join(dir, "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	di, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); !di.IsDir() || got != 0o700 {
		t.Errorf("directory mode got %v, want drwx------", di.Mode())
	}
	si, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if si.Mode().Type() != fs.ModeSocket || si.Mode().Perm() != 0o600 {
		t.Errorf("socket mode got %v, want Srw-------", si.Mode())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close the socket file is still there (%v)", err)
	}
}

func TestListenUnixRefusesALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	first, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := server.ListenUnix(path)
	if err == nil {
		second.Close()
		t.Fatal("a second listener took over a live socket")
	}
	if !errors.Is(err, server.ErrSocketInUse) {
		t.Fatalf("got %v, want ErrSocketInUse", err)
	}
	// The first listener still answers.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket was disturbed: %v", err)
	}
	c.Close()
}

func TestListenUnixReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	// A crashed daemon leaves its socket file behind: nobody listens on it.
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("setup: no stale socket at %s (%v)", path, err)
	}
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatalf("got %v, want the stale socket replaced", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestListenUnixRefusesWhatIsNotASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := server.ListenUnix(path); !errors.Is(err, server.ErrNotSocket) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("got %v, want ErrNotSocket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Fatalf("the file was touched: %q, %v", b, err)
	}
}

func TestListenUnixRefusesAnUnsafeDirectory(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // umask-proof
		t.Fatal(err)
	}
	groupW := filepath.Join(base, "group")
	if err := os.Mkdir(groupW, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupW, 0o770); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir string }{
		{"world-writable", open},
		{"group-writable", groupW},
		{"symlink", link},
		{"not a directory", file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := server.ListenUnix(filepath.Join(tc.dir, "r.sock"))
			if err == nil {
				l.Close()
				t.Fatal("got a listener, want a refusal")
			}
			if !errors.Is(err, server.ErrUnsafeDir) {
				t.Fatalf("got %v, want ErrUnsafeDir", err)
			}
		})
	}
}

func TestListenUnixKeepsAnExistingSafeDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := server.ListenUnix(filepath.Join(dir, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Fatalf("an existing directory's mode changed to %v", fi.Mode())
	}
}
