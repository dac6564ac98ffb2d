package main

// End to end, issue 41's "rotation leaves a trace": a caller mints, the
// daemon's store rotates until the file holding that mint is deleted, and
// audit scan still counts it while audit verify vouches for the trail;
// removing a rotated record, or keeping a deleted file's bytes under its
// name, makes audit verify fail. And the minimum retention: a store kept
// past its budget refuses mints RegistrarBusy and says retention_held.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// retentionConfig is the smallest store: files of 64 KiB, one retained, a
// budget no wave of the test meets.
const retentionConfig = `audit_max_file_bytes = 65536
audit_max_retained_files = 1
rate_limit_admission_burst = 100000
`

// generations reads every rotated generation of dir, by name.
func generations(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue // deleted meanwhile
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// wave mints hosts x 8 registrations through the binary's load driver.
func (d *daemonProc) wave(t *testing.T, hosts int) {
	t.Helper()
	code, out, errOut := d.run("load", "wave", "--socket", d.socket, "--audit-dir", "-", "--hosts", fmt.Sprint(hosts), "--modules-per-host", "8",
		"--component", "review", "--concurrency", "4", "--settle", "0s", "--progress", "off")
	if code != exitOK {
		t.Fatalf("load wave: exit %d\n%s%s", code, out, errOut)
	}
}

// storeHoldsText reports whether a file of dir holds s.
func storeHoldsText(t *testing.T, dir, s string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

func TestEndToEndAMintRotatedAwayIsStillCountedAndTheTrailVerifies(t *testing.T) {
	d := startDaemon(t, retentionConfig, "")
	flags := []string{"--socket", d.socket, "--service-name", "review", "--host", "h1", "--instance", "7", "--component", "review",
		"--reload", "systemctl reload review.service"}
	code, out, errOut := d.run(append([]string{"mint"}, flags...)...)
	if code != exitOK || !strings.HasPrefix(out, "first_mint h1-review-007") {
		t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
	}
	// A mint's intent record carries its spec.reload (issue 41, part 6).
	intentRE := regexp.MustCompile(`(?m)^\{"record_version":1,"phase":"intent",[^\n]*"requested":\{"service_name":"review","host":"h1","instance":7,"reload":"systemctl reload review.service"\}\}$`)
	if active, err := os.ReadFile(filepath.Join(d.auditDir, "registrar-audit.jsonl")); err != nil || !intentRE.Match(active) {
		t.Fatalf("the mint's intent record does not carry its spec.reload (%v):\n%s", err, active)
	}
	mints := 1

	// Waves of 32 mints (under half a file each), so every generation is
	// seen, and copied, before the rotation after next deletes it.
	seen := map[string][]byte{}
	var mintFile string
	for waves := 0; mintFile == "" || storeHoldsText(t, d.auditDir, `"host":"h1","instance":7`); waves++ {
		if waves > 60 {
			t.Fatal("the mint's generation was not deleted after 60 waves")
		}
		d.wave(t, 4)
		mints += 32
		for name, b := range generations(t, d.auditDir) {
			if _, ok := seen[name]; !ok {
				seen[name] = b
				if bytes.Contains(b, []byte(`"host":"h1","instance":7`)) {
					mintFile = name
				}
			}
		}
	}
	d.wave(t, 4) // one more deletion: the mint's count is carried on once more
	mints += 32
	d.stop()
	if _, err := os.Lstat(filepath.Join(d.auditDir, mintFile)); !os.IsNotExist(err) {
		t.Fatalf("%s, which held the mint, is still there: %v", mintFile, err)
	}

	// audit scan --by identity still counts the mint: every mint the
	// caller made, those of deleted files among them.
	code, out, errOut = d.run("audit", "scan", "--dir", d.auditDir, "--by", "identity", "--top", "0", "--json")
	var scan struct {
		Anomalies   bool `json:"anomalies"`
		Invocations []struct {
			CallerIdentity string `json:"caller_identity"`
			Verb, Outcome  string
			Invocations    uint64 `json:"invocations"`
			Rotated        uint64 `json:"rotated"`
		} `json:"invocations_by_identity"`
	}
	if err := json.Unmarshal([]byte(out), &scan); err != nil || code != auditScanClean || scan.Anomalies {
		t.Fatalf("audit scan: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	caller := fmt.Sprintf("unix-peer:uid=%d", os.Geteuid())
	var minted, rotated uint64
	for _, r := range scan.Invocations {
		if r.CallerIdentity == caller && r.Verb == "mint" && (r.Outcome == "first_mint" || r.Outcome == "idempotent_remint") {
			minted += r.Invocations
			rotated += r.Rotated
		}
	}
	if minted != uint64(mints) || rotated == 0 {
		t.Fatalf("audit scan counts %d mints of %s (%d of deleted files), want the %d made, some of deleted files:\n%s", minted, caller, rotated, mints, out)
	}

	code, out, errOut = d.run("audit", "verify", "--dir", d.auditDir)
	if code != auditVerifyOK || !strings.Contains(out, "result: verified") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}

	t.Run("a rotated record removed", func(t *testing.T) {
		dir := copyDir(t, d.auditDir)
		removeFirstRotated(t, dir)
		d.wantVerifyFails(t, dir, "") // a hole among the records, or the deletion it recorded unrecorded
	})
	t.Run("a deleted file's bytes kept under its name", func(t *testing.T) {
		dir := copyDir(t, d.auditDir)
		if err := os.WriteFile(filepath.Join(dir, mintFile), seen[mintFile], 0o600); err != nil {
			t.Fatal(err)
		}
		d.wantVerifyFails(t, dir, "")
	})
	t.Run("the last deleted file's bytes kept under its name", func(t *testing.T) {
		dir := copyDir(t, d.auditDir)
		var last string
		for name := range seen {
			if _, err := os.Lstat(filepath.Join(d.auditDir, name)); os.IsNotExist(err) && name > last {
				last = name
			}
		}
		if err := os.WriteFile(filepath.Join(dir, last), seen[last], 0o600); err != nil {
			t.Fatal(err)
		}
		d.wantVerifyFails(t, dir, "deleted_file_present")
	})
}

// wantVerifyFails runs audit verify --json on dir and wants exit 1 with a
// problem of kind (any, when kind is "").
func (d *daemonProc) wantVerifyFails(t *testing.T, dir, kind string) {
	t.Helper()
	code, out, errOut := d.run("audit", "verify", "--dir", dir, "--json")
	var rep struct {
		Verified bool `json:"verified"`
		Problems []struct {
			Kind, File, Detail string
			Line               uint64
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != auditVerifyProblems || rep.Verified || len(rep.Problems) == 0 {
		t.Fatalf("audit verify: exit %d, %v; want 1 and a problem\n%s%s", code, err, out, errOut)
	}
	if kind == "" {
		return
	}
	for _, p := range rep.Problems {
		if p.Kind == kind {
			return
		}
	}
	t.Errorf("audit verify found %+v, want a %s", rep.Problems, kind)
}

// copyDir copies a store's files to a fresh directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// removeFirstRotated removes the first rotated record of dir's files in
// name order (generations, then the active file).
func removeFirstRotated(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	for _, n := range append(names, filepath.Join(dir, "registrar-audit.jsonl")) {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		for i, l := range lines {
			if bytes.Contains(l, []byte(`"action":"rotated"`)) {
				if err := os.WriteFile(n, bytes.Join(append(lines[:i:i], lines[i+1:]...), nil), 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatal("no rotated record in the store")
}

// TestEndToEndAMinimumRetentionRefusesMintsWhileItHoldsFiles: with
// audit_min_retention_seconds far longer than the test, the store keeps
// its generations past the budget: the capacity state becomes
// retention_held, a mint is refused RegistrarBusy (exit 75) and writes
// nothing, a deregister is still answered.
func TestEndToEndAMinimumRetentionRefusesMintsWhileItHoldsFiles(t *testing.T) {
	d := startDaemon(t, retentionConfig+"audit_min_retention_seconds = 3600\n", "")
	for floods := 0; len(generations(t, d.auditDir)) <= 1; floods++ { // until past audit_max_retained_files = 1
		if floods > 40 {
			t.Fatal("nothing held after 40 floods")
		}
		// A flood of remints does not retry a RegistrarBusy (a wave would
		// wait out the hour's retry_after).
		if code, out, errOut := d.run("load", "flood", "--socket", d.socket, "--audit-dir", "-", "--bucket", "admission", "--requests", "64",
			"--concurrency", "4", "--settle", "0s", "--progress", "off"); code != exitOK {
			t.Fatalf("load flood: exit %d\n%s%s", code, out, errOut)
		}
	}
	flags := []string{"--socket", d.socket, "--service-name", "review", "--host", "h9", "--instance", "1", "--component", "review"}
	code, out, errOut := d.run(append([]string{"mint"}, flags...)...)
	if code != exitRetryable || !strings.Contains(errOut+out, "RegistrarBusy") {
		t.Fatalf("a mint while retention holds files: exit %d\n%s%s; want 75, RegistrarBusy", code, out, errOut)
	}
	if storeHoldsText(t, d.auditDir, `"host":"h9"`) {
		t.Error("the refused mint wrote a record")
	}
	if code, out, errOut := d.run(append([]string{"deregister"}, flags...)...); code != exitOK {
		t.Errorf("a deregister while retention holds files: exit %d\n%s%s", code, out, errOut)
	}
	state := regexp.MustCompile(`(?m)^registrar_audit_store_state\{[^}]*state="retention_held"[^}]*\} 1$`)
	held := regexp.MustCompile(`(?m)^registrar_audit_store_held_files(\{[^}]*\})? [1-9]`)
	var exp string
	if !poll(10*time.Second, func() bool {
		exp = d.scrape()
		return state.MatchString(exp) && held.MatchString(exp)
	}) {
		t.Fatalf("/metrics does not show the hold after the tick:\n%s", grepLines(exp, "registrar_audit_"))
	}
	d.stop()
	if code, out, _ := d.run("audit", "verify", "--dir", d.auditDir); code != auditVerifyOK {
		t.Errorf("audit verify of a held store (nothing deleted): exit %d\n%s", code, out)
	}
}

// grepLines is the lines of text containing s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
