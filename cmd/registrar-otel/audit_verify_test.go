package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

const verifyCaller = "unix-peer:uid=4242"

// rotatedStore writes a store whose first generation held verifyCaller's
// one mint and was deleted by retention (files of the smallest size,
// one retained), in batches so it takes few fsyncs.
func rotatedStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	at := time.Now().Add(-time.Hour)
	s, err := audit.Open(audit.Options{Dir: dir, MaxFileBytes: audit.MinMaxFileBytes, MaxRetainedFiles: 1, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mint := &audit.Record{
		Phase: audit.PhaseOutcome, RequestID: "mint-of-4242", Verb: vocab.Mint, CallerIdentity: verifyCaller,
		Requested:      &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7, Reload: "systemctl reload review"},
		RegistrationID: "h1-review-007", Outcome: &audit.Outcome{Class: vocab.ClassFirstMint},
	}
	in := *mint
	in.Phase, in.Outcome, in.RegistrationID = audit.PhaseIntent, nil, ""
	if err := s.Append(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(context.Background(), mint); err != nil {
		t.Fatal(err)
	}
	for n := 0; s.Stats().RotatedRecords < 3; n++ {
		if n > 50 {
			t.Fatal("no deletion after 50 batches")
		}
		var batch []*audit.Record
		for i := range 200 {
			r := *mint
			r.RequestID, r.CallerIdentity = fmt.Sprintf("q%02d-%03d", n, i), fmt.Sprintf("unix-peer:uid=%d", 1000+i%3)
			batch = append(batch, &r)
		}
		for _, err := range s.AppendBatch(context.Background(), batch) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func auditVerifyOutput(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runAuditVerify(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestAuditVerifyAndScanAfterRetention: after retention deleted the file
// of a caller's mint, audit scan --by identity still counts it and audit
// verify passes; with the rotated record that carries it removed, verify
// exits 1 naming the problem, in text and --json.
func TestAuditVerifyAndScanAfterRetention(t *testing.T) {
	dir := rotatedStore(t)
	code, out, errOut := auditScanOutput("--dir", dir, "--by", "identity", "--top", "0", "--json")
	if code != auditScanClean {
		t.Fatalf("audit scan: exit %d\n%s%s", code, out, errOut)
	}
	var scan struct {
		Invocations []struct {
			CallerIdentity       string `json:"caller_identity"`
			Verb, Outcome        string
			Invocations, Rotated uint64
		} `json:"invocations_by_identity"`
	}
	if err := json.Unmarshal([]byte(out), &scan); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range scan.Invocations {
		if r.CallerIdentity == verifyCaller {
			found = r.Verb == "mint" && r.Outcome == "first_mint" && r.Invocations == 1 && r.Rotated == 1
		}
	}
	if !found {
		t.Fatalf("audit scan --by identity does not count %s's mint from a deleted file: %+v", verifyCaller, scan.Invocations)
	}
	code, out, _ = auditScanOutput("--dir", dir, "--by", "identity", "--top", "0")
	if !strings.Contains(out, "invocations by caller identity") || !regexpLine(out, verifyCaller+`\s+mint\s+first_mint\s+1\s+1`) {
		t.Errorf("audit scan --by identity text (exit %d) lacks the caller's row:\n%s", code, out)
	}

	code, out, errOut = auditVerifyOutput("--dir", dir)
	if code != auditVerifyOK || !strings.Contains(out, "result: verified") || !strings.Contains(out, "problems: 0") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = auditVerifyOutput("--dir", dir, "--json")
	var ok verifyJSON
	if err := json.Unmarshal([]byte(out), &ok); err != nil || code != auditVerifyOK || !ok.Verified || ok.FirstProblem != nil ||
		ok.Problems == nil || len(ok.Deleted) == 0 || ok.NewestRotation == 0 {
		t.Fatalf("audit verify --json: exit %d, %v\n%s", code, err, out)
	}

	// The rotated record carrying the mint removed.
	removeRotated(t, dir, verifyCaller)
	code, out, _ = auditVerifyOutput("--dir", dir)
	if code != auditVerifyProblems || !strings.Contains(out, "result: FAILED: ") {
		t.Fatalf("audit verify of a store missing a rotated record: exit %d\n%s", code, out)
	}
	code, out, _ = auditVerifyOutput("--dir", dir, "--json")
	var bad verifyJSON
	if err := json.Unmarshal([]byte(out), &bad); err != nil || code != auditVerifyProblems || bad.Verified || bad.FirstProblem == nil ||
		bad.ProblemCount == 0 || bad.FirstProblem.File == "" || bad.FirstProblem.Detail == "" {
		t.Fatalf("audit verify --json of a broken trail: exit %d, %v\n%s", code, err, out)
	}
}

func TestAuditVerifyUsageAndUnreadableStoreExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--dir", filepath.Join(t.TempDir(), "missing")},
		{"--dir", t.TempDir(), "extra"},
		{"--window", "1h"},
		{"--config", filepath.Join(t.TempDir(), "none.toml")},
	} {
		if code, _, errOut := auditVerifyOutput(args...); code != auditVerifyFailed || errOut == "" {
			t.Errorf("audit verify %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	// An empty store verifies.
	if code, out, _ := auditVerifyOutput("--dir", t.TempDir()); code != auditVerifyOK {
		t.Errorf("an empty store: exit %d\n%s", code, out)
	}
}

// removeRotated removes, from every file of dir, the rotated records
// that count identity.
func removeRotated(t *testing.T, dir, identity string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var kept bytes.Buffer
		for _, l := range bytes.SplitAfter(b, []byte("\n")) {
			if bytes.Contains(l, []byte(`"action":"rotated"`)) && bytes.Contains(l, []byte(`"identity":"`+identity+`"`)) {
				removed++
				continue
			}
			kept.Write(l)
		}
		if err := os.WriteFile(path, kept.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if removed == 0 {
		t.Fatalf("no rotated record counts %s", identity)
	}
}

// regexpLine reports whether a line of text matches the pattern.
func regexpLine(text, pattern string) bool {
	return regexp.MustCompile(`(?m)^\s*` + pattern + `\s*$`).MatchString(text)
}
