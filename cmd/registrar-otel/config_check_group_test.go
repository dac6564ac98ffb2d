package main

import (
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// config check resolves registrar.socket_group the way serve does when it
// binds the socket: a group the host does not have is an error naming the
// key and the group, exit 2, worded as serve's refusal.
func TestConfigCheckRefusesASocketGroupTheHostLacks(t *testing.T) {
	const missing = "no-such-group-registrar-test"
	dir := shortTempDir(t)
	path := writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+missing+`"`, ""))
	want := `registrar.socket_group must name a group that exists on this host (group: unknown group ` + missing + `), got "` + missing + `"`
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckInvalid {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, configCheckInvalid, stdout, stderr)
	}
	if !strings.Contains(stderr, want+"\n") || !strings.Contains(stderr, "config check: 1 error in "+path) {
		t.Fatalf("stderr:\n%s\nwant the line %q and one error", stderr, want)
	}
	code, res := checkJSON(t, "--config", path)
	if code != configCheckInvalid || res.OK || len(res.Errors) != 1 || res.Errors[0].Key != "registrar.socket_group" || res.Errors[0].Message != want {
		t.Fatalf("--json: exit %d, ok %v, errors %+v; want 2 and one registrar.socket_group error", code, res.OK, res.Errors)
	}

	// serve refuses the same configuration with the same words (in its
	// log line's quoted error value).
	var out, errb bytes.Buffer
	quoted := strconv.Quote(want)
	if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), quoted[1:len(quoted)-1]) {
		t.Fatalf("serve: exit %d, stderr:\n%s\nwant %d and %q", code, errb.String(), exitUsage, want)
	}

	// The configuration pages quote it, for the package's group.
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "configuration.md"))
		if err != nil {
			t.Fatal(err)
		}
		if quote := strings.ReplaceAll(want, missing, "registrar-callers"); !strings.Contains(string(raw), quote) {
			t.Errorf("docs/%s/configuration.md does not quote:\n  %s", lang, quote)
		}
	}

	// A numeric gid the host lacks.
	gid := strconv.Itoa(unusedIDs(t, 1)[0])
	path = writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+gid+`"`, ""))
	code, res = checkJSON(t, "--config", path)
	wantGID := `registrar.socket_group must name a group that exists on this host (group: unknown groupid ` + gid + `), got "` + gid + `"`
	if code != configCheckInvalid || len(res.Errors) != 1 || res.Errors[0].Message != wantGID {
		t.Fatalf("gid %s: exit %d, errors %+v; want 2 and %q", gid, code, res.Errors, wantGID)
	}
}

func TestConfigCheckAcceptsAnExistingSocketGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := shortTempDir(t)
	for _, group := range []string{g.Name, g.Gid} {
		path := writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+group+`"`, ""))
		code, res := checkJSON(t, "--config", path)
		if code != configCheckOK || !res.OK {
			t.Fatalf("socket_group %q: exit %d, errors %+v; want 0", group, code, res.Errors)
		}
		sock := filepath.Join(dir, "run", "r.sock")
		if st, d := pathState(res, sock); st != pathCreate || d != "absent; serve creates the socket 0660 in group "+group {
			t.Errorf("socket_group %q: %s: state %q detail %q; want create, 0660 in the group", group, sock, st, d)
		}
	}
}
