package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 27, item 3: with audit_record_dir owned by another uid, config
// check printed OK. Every one of the three directories now gets serve's
// owner and ancestor rules, worded as serve refuses them, under its key.
func TestConfigCheckRefusesAForeignOwnedDirectoryUnderItsKey(t *testing.T) {
	needRoot(t, "chown to another uid")
	base := t.TempDir()
	mk := func(name string) string { return mkdirOwned(t, filepath.Join(base, name), 0o755, 4242) }
	run, state, auditDir := mk("run"), mk("state"), mk("audit")
	code, res := checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(filepath.Join(run, "registrar.sock"), state, auditDir)))
	if code != configCheckInvalid || res.OK {
		t.Fatalf("exit %d ok %v, want 2", code, res.OK)
	}
	const foreign = ": is owned by uid 4242, not by this user (0) or root"
	for _, tc := range []struct{ key, path, detail string }{
		{"registrar.socket_path", run, "wire: unsafe socket directory: " + run + " is owned by uid 4242"},
		{"registrar.state_dir", state, "embedded: refusing " + state + foreign},
		{"registrar.audit_record_dir", auditDir, "audit: refusing " + auditDir + foreign},
	} {
		if st, d := pathState(res, tc.path); st != pathRefuse || !strings.HasPrefix(d, tc.detail) {
			t.Errorf("%s: state %q detail %q; want refuse, %q", tc.path, st, d, tc.detail)
		}
		found := false
		for _, e := range res.Errors {
			found = found || e.Key == tc.key && strings.Contains(e.Message, tc.path)
		}
		if !found {
			t.Errorf("no error under %s naming %s in %+v", tc.key, tc.path, res.Errors)
		}
	}
}

// The ancestor rule, read-only: a directory (existing or still to be
// created) below a world-writable, non-sticky directory is refused, as
// serve refuses it; below a sticky one (like /tmp) it is not.
func TestConfigCheckRefusesADirectoryUnderAnUnsafeAncestor(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	mkdirMode(t, open, 0o777)
	existing := filepath.Join(open, "audit")
	mkdirMode(t, existing, 0o700)
	missing := filepath.Join(open, "lib", "state")
	sock := filepath.Join(base, "run", "registrar.sock")
	code, res := checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, missing, existing)))
	if code != configCheckInvalid {
		t.Fatalf("exit %d, want 2", code)
	}
	under := ": lies under " + open + ", which has mode 0777 (group- or world-writable and not sticky)"
	for _, tc := range []struct{ path, detail string }{
		{missing, "embedded: refusing " + missing + under},
		{existing, "audit: refusing " + existing + under},
	} {
		if st, d := pathState(res, tc.path); st != pathRefuse || d != tc.detail {
			t.Errorf("%s: state %q detail %q; want refuse, %q", tc.path, st, d, tc.detail)
		}
	}
	chmod(t, open, 0o777|os.ModeSticky)
	code, res = checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, missing, existing)))
	if st, _ := pathState(res, existing); code != configCheckOK || st != pathOK {
		t.Errorf("under a sticky ancestor: exit %d, audit state %q, errors %+v; want 0, ok", code, st, res.Errors)
	}
}
