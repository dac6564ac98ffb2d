package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func auditSealOutput(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runAuditSeal(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestAuditSealInitCreatesTheKeyOnce: init creates the key file (0600)
// and prints the verification key once; a second init changes nothing
// and exits 1.
func TestAuditSealInitCreatesTheKeyOnce(t *testing.T) {
	state := filepath.Join(t.TempDir(), "lib")
	code, out, errOut := auditSealOutput("init", "--state-dir", state, "--json")
	if code != auditSealCreated {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var got sealJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	k, err := audit.ParseVerificationKey(got.VerificationKey)
	if err != nil || audit.KeyID(&k) != got.KeyID || got.KeyFile != filepath.Join(state, audit.SealKeyFileName) || got.StateDir != state {
		t.Fatalf("--json %+v: %v", got, err)
	}
	fi, err := os.Stat(got.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	before, _ := os.ReadFile(got.KeyFile)
	code, out, errOut = auditSealOutput("init", "--state-dir", state)
	if after, _ := os.ReadFile(got.KeyFile); code != auditSealExists || !bytes.Equal(before, after) || !strings.Contains(errOut, "already holds a sealing key") || strings.Contains(out, "verification key") {
		t.Fatalf("a second init: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Text: the key printed once, and what to do next.
	state2 := filepath.Join(t.TempDir(), "lib")
	code, out, _ = auditSealOutput("init", "--state-dir", state2)
	if code != auditSealCreated || !strings.Contains(out, "verification key (shown once") || !strings.Contains(out, "audit verify --key") {
		t.Fatalf("text: exit %d\n%s", code, out)
	}
}

func TestAuditSealUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--state-dir", t.TempDir()},
		{"make", "--state-dir", t.TempDir()},
		{"init", "--state-dir", t.TempDir(), "--config", "x.toml"},
		{"init", "--config", filepath.Join(t.TempDir(), "none.toml")},
		{"init", "--state-dir", t.TempDir(), "extra"},
	} {
		if code, _, errOut := auditSealOutput(args...); code != auditSealFailed || errOut == "" {
			t.Errorf("audit seal %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	// A state directory others may write to is refused, as the daemon refuses it.
	open := filepath.Join(t.TempDir(), "lib")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if code, _, errOut := auditSealOutput("init", "--state-dir", open); code != auditSealFailed || !strings.Contains(errOut, "cannot be used") {
		t.Errorf("a world-writable state directory: exit %d, %q", code, errOut)
	}
}

// sealedStore writes a sealed store (seal init, then a store opened with
// the key) of a few records, and returns its directory, the verification
// key and the heads logged.
func sealedStore(t *testing.T) (dir, key, heads string) {
	t.Helper()
	root := t.TempDir()
	state, dir := filepath.Join(root, "lib"), filepath.Join(root, "audit")
	code, out, errOut := auditSealOutput("init", "--state-dir", state, "--json")
	if code != auditSealCreated {
		t.Fatalf("seal init: %d %s", code, errOut)
	}
	var sj sealJSON
	json.Unmarshal([]byte(out), &sj)
	d, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k, err := audit.OpenSealKey(d)
	if err != nil {
		t.Fatal(err)
	}
	s, err := audit.Open(audit.Options{Dir: dir, Seal: k, Now: func() time.Time { return time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	for i := range 6 {
		r := &audit.Record{Phase: audit.PhaseIntent, RequestID: "q" + string(rune('a'+i)), Verb: vocab.Mint, CallerIdentity: verifyCaller,
			Requested: &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7}}
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		h, _ := s.SealHead()
		logs.WriteString(`time=2026-09-01T00:00:00.000Z level=INFO msg="audit seal head" component=audit audit_seal_generation=` +
			strconv.Itoa(h.Generation) + ` audit_seal_line=` + strconv.FormatUint(h.Line, 10) + ` audit_seal_epoch=` + strconv.FormatUint(h.Epoch, 10) + ` audit_seal_chain=` + h.Chain + "\n")
	}
	s.Close()
	return dir, sj.VerificationKey, logs.String()
}

// TestAuditVerifyWithTheKey: a sealed store verifies with its key, text
// and --json; an edited line, another key and a cut tail (with the heads,
// read from stdin) are reported with exit 1.
func TestAuditVerifyWithTheKey(t *testing.T) {
	dir, key, heads := sealedStore(t)
	code, out, errOut := auditVerifyOutput("--dir", dir, "--key", key)
	if code != auditVerifyOK || !strings.Contains(out, "chain start: genesis") || !strings.Contains(out, "result: verified") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = auditVerifyOutput("--dir", dir, "--key", key, "--json")
	var ok verifyJSON
	if err := json.Unmarshal([]byte(out), &ok); err != nil || code != auditVerifyOK || ok.Seal == nil || ok.Seal.ChainStart != "genesis" || ok.Seal.Seals != 2 || ok.Seal.ChainedLines != 8 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	code, out, _ = auditVerifyOutput("--dir", dir, "--json")
	if err := json.Unmarshal([]byte(out), &ok); err != nil || code != auditVerifyOK || ok.Seal != nil {
		t.Fatalf("--json without --key: seal %+v, exit %d", ok.Seal, code)
	}

	stdinReader = strings.NewReader(heads)
	defer func() { stdinReader = os.Stdin }()
	if code, out, _ = auditVerifyOutput("--dir", dir, "--key", key, "--heads", "-"); code != auditVerifyOK || !strings.Contains(out, "heads: 6 read, 1 checked") {
		t.Fatalf("with the heads: exit %d\n%s", code, out)
	}

	// Another key: the store is not its.
	other, _, _ := sealedStore(t)
	_, otherKey, _ := sealedStore(t)
	if code, out, _ = auditVerifyOutput("--dir", other, "--key", otherKey); code != auditVerifyProblems || !strings.Contains(out, "FAILED: other_key") {
		t.Fatalf("another key: exit %d\n%s", code, out)
	}

	// A cut tail: the chain alone verifies; the heads find it.
	active := filepath.Join(dir, audit.ActiveFileName)
	b, _ := os.ReadFile(active)
	ls := strings.SplitAfter(string(b), "\n")
	os.WriteFile(active, []byte(strings.Join(ls[:len(ls)-3], "")), 0o600)
	if code, _, _ = auditVerifyOutput("--dir", dir, "--key", key); code != auditVerifyOK {
		t.Fatalf("a cut tail without the heads: exit %d", code)
	}
	headsFile := filepath.Join(t.TempDir(), "heads.log")
	os.WriteFile(headsFile, []byte(heads), 0o600)
	code, out, _ = auditVerifyOutput("--dir", dir, "--key", key, "--heads", headsFile, "--json")
	var bad verifyJSON
	if err := json.Unmarshal([]byte(out), &bad); err != nil || code != auditVerifyProblems || bad.FirstProblem == nil || bad.FirstProblem.Kind != audit.VerifyTruncated {
		t.Fatalf("a cut tail with the heads: exit %d, %v\n%s", code, err, out)
	}

	// An edited line.
	b, _ = os.ReadFile(active)
	os.WriteFile(active, bytes.Replace(b, []byte(`"host":"h1"`), []byte(`"host":"h9"`), 1), 0o600)
	if code, out, _ = auditVerifyOutput("--dir", dir, "--key", key); code != auditVerifyProblems || !strings.Contains(out, "FAILED: chain_mismatch at "+audit.ActiveFileName+":2") {
		t.Fatalf("an edited line: exit %d\n%s", code, out)
	}
}

func TestAuditVerifyKeyAndHeadsUsageErrorsExit2(t *testing.T) {
	dir, key, _ := sealedStore(t)
	for _, args := range [][]string{
		{"--dir", dir, "--key", "abc"},
		{"--dir", dir, "--key", ""},
		{"--dir", dir, "--heads", "-"},
		{"--dir", dir, "--key", key, "--heads", filepath.Join(t.TempDir(), "none.log")},
	} {
		if code, _, errOut := auditVerifyOutput(args...); code != auditVerifyFailed || errOut == "" {
			t.Errorf("audit verify %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}

// TestAuditScanShowsTheSeals: a sealed store's seals are admin records
// audit scan lists, with their subject, in text and --json.
func TestAuditScanShowsTheSeals(t *testing.T) {
	dir, _, _ := sealedStore(t)
	// The fixture's intents have no outcome: anomalies, beside the point.
	code, out, _ := auditScanOutput("--dir", dir, "--window", "87600h")
	if !strings.Contains(out, "sealed by registrar-otel:daemon: epoch 0 closed (start), key id ") {
		t.Fatalf("text: exit %d\n%s", code, out)
	}
	code, out, _ = auditScanOutput("--dir", dir, "--window", "87600h", "--json")
	if !strings.Contains(out, `"sealed": 2`) || !strings.Contains(out, `"epoch": 1,`) || !strings.Contains(out, `"reason": "stop"`) {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}

// TestGoldenAuditVerifySealed holds both forms of audit verify --key
// --heads over a sealed store written with a fixed key and clock: one
// edited line, so every member of the seal's report and a problem show.
func TestGoldenAuditVerifySealed(t *testing.T) {
	root := t.TempDir()
	state, dir := filepath.Join(root, "lib"), filepath.Join(root, "audit")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seed := bytes.Repeat([]byte{0x5e}, audit.SealKeyBytes)
	key, _, err := audit.CreateSealKey(d, bytes.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	k, err := audit.OpenSealKey(d)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := audit.Open(audit.Options{Dir: dir, Seal: k, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var heads strings.Builder
	for _, r := range []*audit.Record{scanIntent("r-1"), scanOutcome("r-1"), scanIntent("r-2"), scanOutcome("r-2")} {
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		h, _ := s.SealHead()
		fmt.Fprintf(&heads, "time=2026-01-02T03:04:05.000Z level=INFO msg=%q component=audit %s=%d %s=%d %s=%d %s=%s %s=%s\n", audit.HeadMessage,
			audit.HeadAttrGeneration, h.Generation, audit.HeadAttrLine, h.Line, audit.HeadAttrEpoch, h.Epoch, audit.HeadAttrChain, h.Chain, audit.HeadAttrKeyID, h.KeyID)
	}
	s.Close()
	active := filepath.Join(dir, audit.ActiveFileName)
	b, _ := os.ReadFile(active)
	writeFile(t, active, bytes.Replace(b, []byte(`"request_id":"r-2"`), []byte(`"request_id":"r-3"`), 1), 0o600)
	headsFile := filepath.Join(root, "heads.log")
	writeFile(t, headsFile, []byte(heads.String()), 0o600)
	for _, form := range []struct{ name, flag string }{{"audit_verify_sealed.json", "--json"}, {"audit_verify_sealed.txt", ""}} {
		args := []string{"--dir", dir, "--key", key, "--heads", headsFile}
		if form.flag != "" {
			args = append(args, form.flag)
		}
		code, out, errOut := auditVerifyOutput(args...)
		if code != auditVerifyProblems {
			t.Fatalf("%s: exit %d\n%s%s", form.name, code, out, errOut)
		}
		golden(t, form.name, []byte(strings.ReplaceAll(out, dir, "$DIR")))
	}
}
