//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withinASecond runs f and fails the test if it has not returned within a
// second: a reader that opens a FIFO by path without O_NONBLOCK blocks
// until a writer comes, which is forever. (A bounded wait for an answer,
// not a sleep.)
func withinASecond(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatalf("%s: still blocked after a second", what)
		return nil
	}
}

// mkfifo makes a FIFO nobody writes to; the cleanup opens it for writing
// without blocking, so a reader stuck on it (the test failing) is released.
func mkfifo(t *testing.T, mode uint32) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return path
}

func TestAFIFOConfigFileIsRefusedAtOnceNamingThePath(t *testing.T) {
	path := mkfifo(t, 0o600)
	err := withinASecond(t, "Load of a FIFO", func() error { _, err := Load(path, nil, nil); return err })
	var fe *FileError
	if !errors.As(err, &fe) || err.Error() != path+": cannot read configuration file: is a named pipe (FIFO), not a regular file" {
		t.Errorf("got %v, want a *FileError naming %s as a FIFO", err, path)
	}
}

func TestADeviceConfigFileIsRefused(t *testing.T) {
	_, err := Load("/dev/zero", nil, nil)
	if err == nil || err.Error() != "/dev/zero: cannot read configuration file: is a character device, not a regular file" {
		t.Errorf("got %v, want /dev/zero refused as a character device", err)
	}
}

func TestAConfigFileOwnedByAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	dir := t.TempDir()
	path := writeAt(t, filepath.Join(dir, "foreign.toml"), minimalDoc, 0o644)
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, nil, nil)
	var ue *UnsafeFileError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), path+": unsafe configuration file: it is owned by uid 4242, neither root nor this user (uid 0)") {
		t.Errorf("got %v, want an unsafe-file error naming the path and uid 4242", err)
	}
	// Root's own file passes.
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil, nil); err != nil {
		t.Errorf("root-owned 0644: %v, want it loaded", err)
	}
}

func TestTheTokenFileIsOpenedOnceAndCheckedOnItsDescriptor(t *testing.T) {
	good := writeFile(t, "token", testToken, 0o600)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := mkfifo(t, 0o600)
	cases := []struct{ name, path, want string }{
		{"symlink", link, "is a symlink"},
		{"FIFO", fifo, "is a named pipe (FIFO), not a regular file"},
		{"directory", t.TempDir(), "is a directory, not a regular file"},
		{"device", "/dev/null", "is a character device, not a regular file"},
	}
	if os.Geteuid() == 0 {
		foreign := writeFile(t, "token", testToken, 0o600)
		if err := os.Chown(foreign, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"another user's", foreign, "is owned by uid 4242"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := OpenBao{TokenFile: c.path}
			err := withinASecond(t, "ReadToken", func() error { _, _, err := o.ReadToken(nil); return err })
			if err == nil {
				t.Fatalf("%s accepted", c.path)
			}
			if keyOf(t, err) != "openbao.token_file" || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q, want openbao.token_file, %q and the path", err, c.want)
			}
		})
	}
}

func TestTheSystemdCredentialComesFirst(t *testing.T) {
	credDir := t.TempDir()
	cred := filepath.Join(credDir, CredentialName)
	if err := os.WriteFile(cred, []byte("cred-token\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "token", "file-token", 0o600)
	env := []string{"CREDENTIALS_DIRECTORY=" + credDir, "BAO_TOKEN=env-token"}

	o := OpenBao{TokenFile: file}
	tok, src, err := o.ReadToken(env)
	if err != nil || tok != "cred-token" || src.Credential != cred {
		t.Fatalf("got %q from %v (%v), want cred-token from the credential", tok, src, err)
	}
	if got, want := src.String(), `systemd credential "`+cred+`"`; got != want {
		t.Errorf("source %q, want %q", got, want)
	}
	// Without the credential file in the directory: the token file, then
	// the environment.
	if err := os.Remove(cred); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := o.ReadToken(env); err != nil || tok != "file-token" {
		t.Errorf("got %q (%v), want the token file's", tok, err)
	}
	if tok, _, err := (&OpenBao{}).ReadToken(env); err != nil || tok != "env-token" {
		t.Errorf("got %q (%v), want BAO_TOKEN's", tok, err)
	}
	// A credential others can read is refused, not skipped.
	if err := os.WriteFile(cred, []byte("cred-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cred, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = o.ReadToken(env)
	if err == nil || keyOf(t, err) != "systemd credential openbao-token" || !strings.Contains(err.Error(), "chmod 0600") {
		t.Errorf("got %v, want the credential refused by name", err)
	}
}

// LoadFor and CheckFilesFor judge the owner rule for the uid given, the
// user config check run as root answers for: a file of that user's
// passes, one of anybody else but root does not, and Load and CheckFiles
// stay this process's.
func TestTheOwnerRuleIsJudgedForTheUserGiven(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	path := writeAt(t, filepath.Join(t.TempDir(), "daemons.toml"), minimalDoc, 0o644)
	token := writeFile(t, "token", testToken, 0o600)
	for _, p := range []string{path, token} {
		if err := os.Chown(p, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadFor(path, nil, nil, 4242); err != nil {
		t.Errorf("LoadFor uid 4242 of its own file: %v", err)
	}
	if _, err := LoadFor(path, nil, nil, 4243); err == nil || !strings.Contains(err.Error(), "owned by uid 4242, neither root nor this user (uid 4243)") {
		t.Errorf("LoadFor uid 4243 of uid 4242's file: %v, want it refused naming both", err)
	}
	if _, err := Load(path, nil, nil); err == nil {
		t.Error("Load, as root, of uid 4242's file: accepted")
	}
	cfg := Default()
	cfg.Registrar.Backend = BackendOpenBao
	cfg.Registrar.SubuidFile = ""
	cfg.OpenBao.TokenFile = token
	if _, err := cfg.CheckFilesFor(nil, 4242); err != nil {
		t.Errorf("CheckFilesFor uid 4242 of its own token: %v", err)
	}
	if _, err := cfg.CheckFiles(nil); err == nil || !strings.Contains(err.Error(), "is owned by uid 4242") {
		t.Errorf("CheckFiles, as root, of uid 4242's token: %v, want it refused", err)
	}
}
