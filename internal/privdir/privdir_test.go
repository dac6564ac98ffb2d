//go:build unix

package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// opener is the two ways in, so each rule is tested through both.
type opener struct {
	name string
	open func(path string, o Options) (fs.FileInfo, error)
}

var openers = []opener{
	{"Ensure", Ensure},
	{"Open", func(path string, o Options) (fs.FileInfo, error) {
		d, st, err := Open(path, o)
		if err != nil {
			if d != nil || st != nil {
				return nil, errors.New("Open returned a directory with its error")
			}
			return nil, err
		}
		d.Close()
		return st, nil
	}},
}

// must fails the test on a setup error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mkdir makes a directory with exactly mode, whatever the umask.
func mkdir(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	must(t, os.Mkdir(path, 0o700))
	must(t, os.Chmod(path, mode))
}

// openDir opens path for the test's duration.
func openDir(t *testing.T, path string) *os.File {
	t.Helper()
	d, err := os.Open(path)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func wantUnsafe(t *testing.T, err error, path string, p Problem) *UnsafeError {
	t.Helper()
	ue, ok := errors.AsType[*UnsafeError](err)
	if !ok {
		t.Fatalf("error %v (%T), want an *UnsafeError", err, err)
	}
	if ue.Path != path || ue.Problem != p {
		t.Fatalf("got %s problem %d, want %s problem %d", ue.Path, ue.Problem, path, p)
	}
	if !errors.Is(err, ErrUnsafe) {
		t.Errorf("%v does not match ErrUnsafe", err)
	}
	return ue
}

func wantStep(t *testing.T, err error, s Step) *StepError {
	t.Helper()
	se, ok := errors.AsType[*StepError](err)
	if !ok {
		t.Fatalf("error %v (%T), want a *StepError", err, err)
	}
	if se.Step != s {
		t.Fatalf("step %d (%v), want step %d", se.Step, err, s)
	}
	if se.Error() != se.Err.Error() || !errors.Is(err, se.Err) {
		t.Errorf("a StepError's text is %q, its cause's %q: want the same, and the cause unwrapped", se.Error(), se.Err)
	}
	return se
}

func TestAMissingDirectoryIsCreatedWithItsParents0700(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			st, err := op.open(dir, Options{Owner: true})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("created %s with mode %s, want a directory 0700", dir, fi.Mode())
			}
			if !os.SameFile(st, fi) {
				t.Error("the returned FileInfo is not the directory's")
			}
		})
	}
}

func TestAnExistingSafeDirectoryIsKeptAsItIs(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			mkdir(t, dir, 0o750)
			if _, err := op.open(dir, Options{Owner: true}); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Lstat(dir); fi.Mode().Perm() != 0o750 {
				t.Errorf("mode %s, want the existing 0750 left alone", fi.Mode())
			}
		})
	}
}

func TestASymlinkIsRefusedEvenToASafeDirectory(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			base := t.TempDir()
			target := filepath.Join(base, "target")
			must(t, os.Mkdir(target, 0o700))
			link := filepath.Join(base, "link")
			must(t, os.Symlink(target, link))
			_, err := op.open(link, Options{})
			wantUnsafe(t, err, link, Symlink)
		})
	}
}

func TestAFileIsRefusedAsNotADirectory(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			must(t, os.WriteFile(p, nil, 0o600))
			_, err := op.open(p, Options{})
			wantUnsafe(t, err, p, NotDir)
		})
	}
}

func TestAGroupOrWorldWritableDirectoryIsRefused(t *testing.T) {
	for _, op := range openers {
		for _, mode := range []fs.FileMode{0o720, 0o702, 0o777, 0o1777} {
			t.Run(op.name+"/"+mode.String(), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "d")
				mkdir(t, dir, mode)
				_, err := op.open(dir, Options{})
				ue := wantUnsafe(t, err, dir, Writable)
				if ue.Mode != mode.Perm() {
					t.Errorf("Mode %#o, want %#o", ue.Mode, mode.Perm())
				}
			})
		}
	}
}

func TestAnotherUsersDirectoryIsRefusedOnlyUnderTheOwnerRule(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root; TestCheckAppliesTheOwnerRuleToTheStat covers the rule")
	}
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.Chown(dir, 4242, -1))
			if _, err := op.open(dir, Options{}); err != nil {
				t.Fatalf("without the owner rule: %v", err)
			}
			// Root's own euid is 0, which the rule accepts as root: the
			// foreign owner is 4242 either way.
			_, err := op.open(dir, Options{Owner: true})
			ue := wantUnsafe(t, err, dir, Foreign)
			if ue.Owner != 4242 || ue.User != uint32(os.Geteuid()) {
				t.Errorf("Owner %d User %d, want 4242 and %d", ue.Owner, ue.User, os.Geteuid())
			}
		})
	}
}

// statInfo is an fs.FileInfo with a chosen mode and owner.
type statInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (s statInfo) Name() string       { return "d" }
func (s statInfo) Size() int64        { return 0 }
func (s statInfo) Mode() fs.FileMode  { return s.mode }
func (s statInfo) ModTime() time.Time { return time.Time{} }
func (s statInfo) IsDir() bool        { return s.mode.IsDir() }
func (s statInfo) Sys() any           { return &syscall.Stat_t{Uid: s.uid} }

func TestCheckAppliesEveryRuleInOrder(t *testing.T) {
	me := uint32(os.Geteuid())
	other := me + 1
	if other == 0 {
		other = 1
	}
	for _, c := range []struct {
		name  string
		fi    statInfo
		o     Options
		want  Problem // 0: passes
		owner uint32
	}{
		{"safe", statInfo{fs.ModeDir | 0o700, me}, Options{Owner: true}, 0, 0},
		{"root-owned", statInfo{fs.ModeDir | 0o755, 0}, Options{Owner: true}, 0, 0},
		{"symlink", statInfo{fs.ModeSymlink | 0o777, me}, Options{}, Symlink, 0},
		{"file", statInfo{0o600, me}, Options{}, NotDir, 0},
		{"socket", statInfo{fs.ModeSocket | 0o700, me}, Options{}, NotDir, 0},
		{"group-writable", statInfo{fs.ModeDir | 0o770, me}, Options{}, Writable, 0},
		{"world-writable", statInfo{fs.ModeDir | 0o707, me}, Options{}, Writable, 0},
		{"foreign without the rule", statInfo{fs.ModeDir | 0o700, other}, Options{}, 0, 0},
		{"foreign", statInfo{fs.ModeDir | 0o700, other}, Options{Owner: true}, Foreign, other},
		// The first rule broken is the one reported.
		{"writable and foreign", statInfo{fs.ModeDir | 0o777, other}, Options{Owner: true}, Writable, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ue := Check("/x", c.fi, c.o)
			switch {
			case c.want == 0 && ue != nil:
				t.Fatalf("refused: %v", ue)
			case c.want == 0:
				return
			case ue == nil:
				t.Fatalf("passed, want problem %d", c.want)
			case ue.Problem != c.want:
				t.Fatalf("problem %d (%v), want %d", ue.Problem, ue, c.want)
			case c.want == Foreign && (ue.Owner != c.owner || ue.User != me):
				t.Errorf("Owner %d User %d, want %d and %d", ue.Owner, ue.User, c.owner, me)
			}
		})
	}
}

// The callers' error texts (and the config-check goldens) are built from
// Detail: these words are what an operator reads.
func TestDetailWordsEachProblemAsTheCallersShowIt(t *testing.T) {
	for _, c := range []struct {
		e    UnsafeError
		want string
	}{
		{UnsafeError{Problem: Symlink}, "is a symlink"},
		{UnsafeError{Problem: NotDir}, "is not a directory"},
		{UnsafeError{Problem: Changed}, "changed while being opened"},
		{UnsafeError{Problem: Writable, Mode: 0o775}, "has mode 0775 (group- or world-writable; want 0700)"},
		{UnsafeError{Problem: Foreign, Owner: 1001, User: 1000}, "is owned by uid 1001, not by this user (1000) or root"},
		{UnsafeError{Problem: Ancestor, Above: "/srv", Owner: 1001, User: 1000, Mode: 0o755}, "lies under /srv, which is owned by uid 1001, not by this user (1000) or root"},
		{UnsafeError{Problem: Ancestor, Above: "/srv", Owner: 1000, User: 1000, Mode: 0o777}, "lies under /srv, which has mode 0777 (group- or world-writable and not sticky)"},
		{UnsafeError{Problem: Ancestor, Above: "/srv", Owner: 0, User: 1000, Mode: 0o777}, "lies under /srv, which has mode 0777 (group- or world-writable and not sticky)"},
		{UnsafeError{Problem: 99}, "breaks rule 99"},
	} {
		if got := c.e.Detail(); got != c.want {
			t.Errorf("Detail() = %q, want %q", got, c.want)
		}
	}
	e := &UnsafeError{Path: "/run/x", Problem: Symlink}
	if got, want := e.Error(), "privdir: refusing /run/x: is a symlink"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestOpenRefusesADirectorySwappedAfterItsCheck(t *testing.T) {
	base := t.TempDir()
	checked, swapped := filepath.Join(base, "checked"), filepath.Join(base, "swapped")
	for _, d := range []string{checked, swapped} {
		must(t, os.Mkdir(d, 0o700))
	}
	fi, err := os.Lstat(checked)
	must(t, err)
	// What Open sees when another directory was renamed into the path
	// between its Lstat and its open.
	_, err = opened(openDir(t, swapped), checked, fi, false, Options{})
	wantUnsafe(t, err, checked, Changed)
	// The same directory passes.
	if _, err := opened(openDir(t, checked), checked, fi, false, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenChecksTheModeOnTheOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	must(t, os.Mkdir(dir, 0o700))
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := openDir(t, dir)
	// Loosened after the Lstat: the descriptor's mode is the one that counts.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err = opened(d, dir, fi, false, Options{})
	wantUnsafe(t, err, dir, Writable)
	// A directory Open created is restated 0700 on the descriptor first.
	st, err := opened(d, dir, fi, true, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("mode %s after restating, want 0700", st.Mode())
	}
}

func TestOpenReturnsTheDirectoryOpen(t *testing.T) {
	dir := t.TempDir()
	d, st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Errorf("fsync of the returned directory: %v", err)
	}
	names, err := d.Readdirnames(-1)
	if err != nil || len(names) != 0 {
		t.Errorf("Readdirnames = %q, %v; want the empty directory", names, err)
	}
	if fi, _ := os.Stat(dir); !os.SameFile(fi, st) {
		t.Error("the returned FileInfo is not the directory's")
	}
}

func TestAFailingCallIsAStepError(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			base := t.TempDir()
			file := filepath.Join(base, "file")
			must(t, os.WriteFile(file, nil, 0o600))
			// Lstat fails with ENOTDIR, which is not "missing".
			_, err := op.open(filepath.Join(file, "d"), Options{})
			se := wantStep(t, err, StepStat)
			if !errors.Is(err, syscall.ENOTDIR) || se.Path != filepath.Join(file, "d") {
				t.Errorf("%v (path %s), want ENOTDIR for the path given", err, se.Path)
			}
			// Lstat says missing (a dangling link's target is), MkdirAll
			// then finds the link in its way.
			dangling := filepath.Join(base, "dangling")
			must(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
			_, err = op.open(filepath.Join(dangling, "d"), Options{})
			wantStep(t, err, StepCreate)
		})
	}
}

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

// Every directory up to the root is judged, not the parent alone, and so is
// every directory of the path the parent resolves to, even when the path as
// given passes.
func TestAnUnsafeAncestorIsFoundAboveTheParentAndWhereTheParentResolves(t *testing.T) {
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			base := t.TempDir()
			open := filepath.Join(base, "open")
			mkdir(t, open, 0o777)
			mid := filepath.Join(open, "mid")
			must(t, os.Mkdir(mid, 0o700))
			dir := filepath.Join(mid, "d")
			must(t, os.Mkdir(dir, 0o700))
			_, err := op.open(dir, Options{Ancestors: true})
			if ue := wantUnsafe(t, err, dir, Ancestor); ue.Above != open || ue.Mode != 0o777 {
				t.Errorf("two levels up: Above %s mode %#o, want %s 0777", ue.Above, ue.Mode, open)
			}

			// base/link names mid: stat'ed through it, base/link and base
			// are safe, but mid lies under the 0777 open.
			link := filepath.Join(base, "link")
			must(t, os.Symlink(mid, link))
			_, err = op.open(filepath.Join(link, "d"), Options{Ancestors: true})
			if ue := wantUnsafe(t, err, filepath.Join(link, "d"), Ancestor); ue.Above != open || ue.Mode != 0o777 {
				t.Errorf("through a symlink to a safe parent: Above %s mode %#o, want %s 0777", ue.Above, ue.Mode, open)
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

// CheckFor judges for the uid it is given, not this process's: the owner
// rule accepts that uid or root, and names that uid as the user.
func TestCheckForJudgesTheUserItIsGiven(t *testing.T) {
	me := uint32(os.Geteuid())
	daemon := me + 103
	theirs := statInfo{fs.ModeDir | 0o700, daemon}
	if ue := CheckFor("/x", theirs, Options{Owner: true}, daemon); ue != nil {
		t.Errorf("a directory of uid %d judged for uid %d: %v", daemon, daemon, ue)
	}
	if ue := CheckFor("/x", statInfo{fs.ModeDir | 0o755, 0}, Options{Owner: true}, daemon); ue != nil {
		t.Errorf("root's directory judged for uid %d: %v", daemon, ue)
	}
	mine := statInfo{fs.ModeDir | 0o700, me}
	ue := CheckFor("/x", mine, Options{Owner: true}, daemon)
	if me == 0 {
		if ue != nil {
			t.Errorf("root's directory judged for uid %d: %v", daemon, ue)
		}
		mine.uid = daemon + 1
		ue = CheckFor("/x", mine, Options{Owner: true}, daemon)
	}
	if ue == nil || ue.Problem != Foreign || ue.User != daemon || ue.Owner != mine.uid {
		t.Fatalf("a directory of uid %d judged for uid %d: %v, want Foreign naming uid %d as the user", mine.uid, daemon, ue, daemon)
	}
	if want := fmt.Sprintf("is owned by uid %d, not by this user (%d) or root", mine.uid, daemon); ue.Detail() != want {
		t.Errorf("Detail %q, want %q", ue.Detail(), want)
	}
	// Check is CheckFor of this process's uid.
	if (Check("/x", theirs, Options{Owner: true}) == nil) != (daemon == me) {
		t.Errorf("Check accepted uid %d's directory for uid %d", daemon, me)
	}
}

// CheckAncestorsFor applies the ancestor rule for the uid given: an
// ancestor of that user passes, one of anybody else but root does not.
func TestCheckAncestorsForJudgesTheUserItIsGiven(t *testing.T) {
	me := uint32(os.Geteuid())
	parent := filepath.Join(t.TempDir(), "p")
	mkdir(t, parent, 0o755)
	owner := me
	if me == 0 {
		owner = 4242
		must(t, os.Chown(parent, int(owner), -1))
	}
	dir := filepath.Join(parent, "state")
	if err := CheckAncestorsFor(dir, owner); err != nil {
		t.Errorf("under a parent of uid %d, judged for uid %d: %v", owner, owner, err)
	}
	ue := wantUnsafe(t, CheckAncestorsFor(dir, owner+1), dir, Ancestor)
	if ue.Above != parent || ue.Owner != owner || ue.User != owner+1 {
		t.Errorf("Above %s Owner %d User %d, want %s, %d and %d", ue.Above, ue.Owner, ue.User, parent, owner, owner+1)
	}
}

func TestFileKindNamesEachType(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		fs.ModeSymlink:                    "a symbolic link",
		fs.ModeDir:                        "a directory",
		fs.ModeNamedPipe:                  "a named pipe (FIFO)",
		fs.ModeSocket:                     "a socket",
		fs.ModeDevice | fs.ModeCharDevice: "a character device",
		fs.ModeDevice:                     "a block device",
		fs.ModeIrregular:                  "of type ?---------",
	} {
		if got := FileKind(m); got != want {
			t.Errorf("FileKind(%v) = %q, want %q", m, got, want)
		}
	}
}
