//go:build unix

package privdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The umask filters MkdirAll's 0700; the chmod that follows restates it.
// (The umask is process-wide: this test is not parallel, nor is any other
// test of the package.)
func TestACreatedDirectoryIs0700WhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o377)
	defer syscall.Umask(old)
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if _, err := op.open(dir, Options{}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("mode %s under umask 0377, want 0700", fi.Mode())
			}
		})
	}
}

func TestAnUnsafeAncestorIsRefusedUnderTheAncestorRule(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			base := t.TempDir()
			open := filepath.Join(base, "open")
			mkdir(t, open, 0o777)
			dir := filepath.Join(open, "d")
			must(t, os.Mkdir(dir, 0o700))
			if _, err := op.open(dir, Options{}); err != nil {
				t.Fatalf("without the ancestor rule: %v", err)
			}
			_, err := op.open(dir, Options{Ancestors: true})
			ue := wantUnsafe(t, err, dir, Ancestor)
			if ue.Above != open || ue.Mode != 0o777 {
				t.Errorf("Above %s Mode %#o, want %s 0777", ue.Above, ue.Mode, open)
			}
			if want := "lies under " + open + ", which has mode 0777 (group- or world-writable and not sticky)"; ue.Detail() != want {
				t.Errorf("Detail %q, want %q", ue.Detail(), want)
			}
			// Sticky, like /tmp: an ancestor may be world-writable.
			must(t, os.Chmod(open, 0o777|os.ModeSticky))
			if _, err := op.open(dir, Options{Ancestors: true}); err != nil {
				t.Errorf("under a sticky 1777 ancestor: %v", err)
			}
			// Reached through a symlink, an ancestor is judged by what it
			// resolves to.
			must(t, os.Chmod(open, 0o777))
			link := filepath.Join(base, "link")
			must(t, os.Symlink(open, link))
			_, err = op.open(filepath.Join(link, "d"), Options{Ancestors: true})
			if ue := wantUnsafe(t, err, filepath.Join(link, "d"), Ancestor); ue.Above != link || ue.Mode != 0o777 {
				t.Errorf("through a symlink: Above %s mode %#o, want %s judged by its 0777 target", ue.Above, ue.Mode, link)
			}
		})
	}
}

func TestAnAncestorOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "theirs")
			mkdir(t, parent, 0o755)
			must(t, os.Chown(parent, 4242, 4242))
			dir := filepath.Join(parent, "audit")
			must(t, os.Mkdir(dir, 0o700))
			_, err := op.open(dir, Options{Owner: true, Ancestors: true})
			ue := wantUnsafe(t, err, dir, Ancestor)
			if ue.Above != parent || ue.Owner != 4242 {
				t.Errorf("Above %s Owner %d, want %s and 4242", ue.Above, ue.Owner, parent)
			}
		})
	}
}

// Recheck judges the directory held open, not whatever the path names now:
// a directory renamed away and loosened while a safe one is put at its path
// is still found, and the safe one at the path does not hide it.
func TestRecheckJudgesTheOpenDirectoryNotThePath(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "d")
	d, _, err := Open(dir, Options{Owner: true})
	must(t, err)
	defer d.Close()
	if err := Recheck(d, dir, Options{Owner: true}); err != nil {
		t.Fatalf("Recheck of the directory just opened: %v", err)
	}
	must(t, os.Rename(dir, filepath.Join(base, "moved")))
	mkdir(t, dir, 0o700)
	must(t, os.Chmod(filepath.Join(base, "moved"), 0o777))
	ue := wantUnsafe(t, Recheck(d, dir, Options{Owner: true}), dir, Writable)
	if ue.Mode != 0o777 {
		t.Errorf("Mode %#o, want the open directory's 0777", ue.Mode)
	}
	// Put right (through its new path), it passes again.
	must(t, os.Chmod(filepath.Join(base, "moved"), 0o700))
	if err := Recheck(d, dir, Options{Owner: true}); err != nil {
		t.Errorf("Recheck after chmod 0700: %v", err)
	}
}

func TestRecheckFindsAChownToAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	dir := filepath.Join(t.TempDir(), "d")
	d, _, err := Open(dir, Options{Owner: true})
	must(t, err)
	defer d.Close()
	must(t, os.Chown(dir, 4242, 4242))
	if ue := wantUnsafe(t, Recheck(d, dir, Options{Owner: true}), dir, Foreign); ue.Owner != 4242 {
		t.Errorf("Owner %d, want 4242", ue.Owner)
	}
	if err := Recheck(d, dir, Options{}); err != nil {
		t.Errorf("without the owner rule: %v", err)
	}
}

// CheckAncestors is the ancestor rule alone, for config check: read-only,
// so a missing directory below a safe parent passes and nothing is made.
func TestCheckAncestorsIsTheAncestorRuleAlone(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	mkdir(t, open, 0o777)
	dir := filepath.Join(open, "d")
	if ue := wantUnsafe(t, CheckAncestors(dir), dir, Ancestor); ue.Above != open {
		t.Errorf("Above %s, want %s", ue.Above, open)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckAncestors made %s (lstat: %v)", dir, err)
	}
	must(t, os.Chmod(open, 0o755))
	if err := CheckAncestors(dir); err != nil {
		t.Errorf("under a 0755 parent of this user: %v", err)
	}
}

func TestFileOwnerIsTheStatsUID(t *testing.T) {
	fi, err := os.Stat(t.TempDir())
	must(t, err)
	if uid, ok := FileOwner(fi); !ok || uid != uint32(os.Geteuid()) {
		t.Errorf("FileOwner %d, %v; want this process's uid %d", uid, ok, os.Geteuid())
	}
}
