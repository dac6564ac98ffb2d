//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// verdictLines are every golden and malformed fixture line, and lines aimed
// at where a single pass could differ from the tokenizer: escapes, white
// space, spellings of numbers, truncated records.
func verdictLines(t testing.TB) []struct{ name, line string } {
	var out []struct{ name, line string }
	add := func(name, line string) { out = append(out, struct{ name, line string }{name, line}) }
	for _, tc := range decodeCases(t) {
		add("case/"+tc.name, tc.line)
	}
	for _, gc := range goldenCases() {
		b, err := os.ReadFile(filepath.Join("testdata", gc.name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		add("golden/"+gc.name, strings.TrimSuffix(string(b), "\n"))
	}
	for _, l := range []struct{ name, old, new string }{
		{"escaped caller", `"unix-peer:uid=1000"`, `"unix-peer:uid\u003d1000"`},
		{"escaped slash", `"unix-peer:uid=1000"`, `"unix-peer\/uid=1000"`},
		{"space after colon", `"verb":"mint"`, `"verb": "mint"`},
		{"space before brace", `"instance":7}`, `"instance":7 }`},
		{"instance leading zero", `"instance":7`, `"instance":07`},
		{"instance exponent", `"instance":7`, `"instance":7e0`},
		{"instance zero", `"instance":7`, `"instance":0`},
		{"instance negative", `"instance":7`, `"instance":-7`},
		{"empty request_id", `"request_id":"q1"`, `"request_id":""`},
		{"raw U+2028", `"unix-peer:uid=1000"`, "\"unix-peer\u2028\""},
		{"raw DEL", `"unix-peer:uid=1000"`, "\"unix-peer\x7f\""},
		{"raw U+FFFD", `"unix-peer:uid=1000"`, "\"unix-peer\ufffd\""},
		{"phase unknown", `"phase":"intent"`, `"phase":"intents"`},
		{"verb unknown", `"verb":"mint"`, `"verb":"Mint"`},
	} {
		add("variant/"+l.name, sub(t, goodIntent, l.old, l.new))
	}
	add("variant/trailing newline", goodIntent+"\n")
	add("variant/two newlines", goodIntent+"\n\n")
	add("variant/count leading zero", sub(t, goodLimited, `"count":3`, `"count":03`))
	add("variant/count huge", sub(t, goodLimited, `"count":3`, `"count":18446744073709551616`))
	add("variant/outcome without class", sub(t, goodOutcome, `"class":"refused","reason":"host_mismatch",`, ``))
	add("variant/outcome empty detail", sub(t, goodOutcome, `"detail":"x"`, `"detail":""`))
	return out
}

func verdict(r *audit.Record, err error) string {
	if err != nil {
		var de *audit.DecodeError
		if !errors.As(err, &de) {
			return "error " + err.Error()
		}
		return fmt.Sprintf("reject rule=%s field=%q detail=%q", de.Rule, de.Field, de.Error())
	}
	return "accept " + strings.TrimSuffix(string(audit.Encode(r)), "\n")
}

// TestGoldenDecodeVerdicts pins the token decoder's verdict (the reader's
// behaviour before the single-pass decoder) on every fixture line in
// testdata/decode_verdicts.txt, and checks Unmarshal against it: the same
// rule, field and message for every rejected line, the same record for
// every accepted one. -update rewrites the file from the token decoder,
// never from the new one.
func TestGoldenDecodeVerdicts(t *testing.T) {
	path := filepath.Join("testdata", "decode_verdicts.txt")
	var want bytes.Buffer
	for _, l := range verdictLines(t) {
		fmt.Fprintf(&want, "%s\t%q\n\t%s\n", l.name, l.line, verdict(audit.UnmarshalTokens([]byte(l.line))))
	}
	if *update {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pinned, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading fixture (run with -update to create it): %v", err)
	}
	if !bytes.Equal(pinned, want.Bytes()) {
		t.Fatalf("the token decoder's verdicts differ from %s (run with -update and review the diff)", path)
	}
	var got bytes.Buffer
	for _, l := range verdictLines(t) {
		r, err := audit.Unmarshal([]byte(l.line))
		fmt.Fprintf(&got, "%s\t%q\n\t%s\n", l.name, l.line, verdict(r, err))
		if err == nil {
			tr, terr := audit.UnmarshalTokens([]byte(l.line))
			if terr != nil || !reflect.DeepEqual(r, tr) {
				t.Errorf("%s: Unmarshal gives %+v, the token decoder %+v, %v", l.name, r, tr, terr)
			}
		}
	}
	if g, w := got.String(), string(pinned); g != w {
		gl, wl := strings.Split(g, "\n"), strings.Split(w, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("Unmarshal's verdict differs from the pinned one at line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatal("Unmarshal's verdicts differ from the pinned ones")
	}
	// The single pass must take the canonical lines, or it is not the
	// fast path it claims to be.
	for _, gc := range goldenCases() {
		if gc.name == "escaping" || strings.HasPrefix(gc.name, "truncated") || strings.Contains(gc.name, "truncated") {
			continue // escapes and truncated objects are the token decoder's
		}
		b, _ := os.ReadFile(filepath.Join("testdata", gc.name+".jsonl"))
		if audit.DecodeCanonical(b) == nil {
			t.Errorf("golden %s: the single pass did not take it", gc.name)
		}
	}
}

func checkDecodeAgree(t *testing.T, line []byte) {
	t.Helper()
	r, err := audit.Unmarshal(line)
	tr, terr := audit.UnmarshalTokens(line)
	if verdict(r, err) != verdict(tr, terr) || (err == nil && !reflect.DeepEqual(r, tr)) {
		t.Fatalf("line %q:\nUnmarshal:     %s\ntoken decoder: %s", line, verdict(r, err), verdict(tr, terr))
	}
	if c := audit.DecodeCanonical(line); c != nil && (terr != nil || !reflect.DeepEqual(c, tr)) {
		t.Fatalf("line %q: the single pass took %+v, the token decoder says %s", line, c, verdict(tr, terr))
	}
}

// FuzzDecodeAgreesWithTokens: on any line, Unmarshal (single pass, token
// decoder behind it) and the token decoder alone give the same verdict and
// record, and the single pass never takes a line the token decoder
// rejects.
func FuzzDecodeAgreesWithTokens(f *testing.F) {
	for _, l := range verdictLines(f) {
		f.Add([]byte(l.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkDecodeAgree(t, line) })
}

// agreeScan runs both scans over a store made of the given files (oldest
// first, the last one active) and compares their whole reports.
func agreeScan(t *testing.T, files ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, content := range files {
		name := audit.ActiveFileName
		if i < len(files)-1 {
			name = "registrar-audit-" + now.Add(-time.Hour).Add(time.Duration(i)*time.Second).UTC().Format("20060102T150405Z") + "-000000.jsonl"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := audit.ScanOptions{Dir: dir, Now: now}
	got, err := audit.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := audit.ScanReference(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scan reports differ:\n got %+v\nwant %+v", got, want)
	}
}

// TestScanAgreesWithReference: the scan with the single-pass decoder and
// waiting-only state reports exactly what the reference scan (token decoder,
// every request_id in a map) reports: duplicates of paired and unpaired
// ids, outcomes before their intent, ids outside the registrar's form,
// malformed lines, across generations.
func TestScanAgreesWithReference(t *testing.T) {
	at := func(r *audit.Record, min int) string { return line(t, r, t0.Add(time.Duration(min)*time.Minute)) }
	var lines []string
	for _, tc := range decodeCases(t) {
		lines = append(lines, tc.line)
	}
	malformed := strings.Join(lines, "\n") + "\n"
	ids := []string{"AAAAAAAAAAAA.1", "AAAAAAAAAAAA.2", "AAAAAAAAAAAA.70000", "BBBBBBBBBBBB.1", "q1", "no-dot", "x.01", "AAAAAAAAAAAA.18446744073709551615"}
	var a, b strings.Builder
	for i, id := range ids {
		a.WriteString(at(intent(id), i))
		if i%2 == 0 {
			a.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), i))
		}
	}
	for i, id := range ids {
		b.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), i)) // pairs the odd ones, duplicates the even ones
		b.WriteString(at(intent(id), i))                                              // a duplicate intent each
	}
	b.WriteString(at(outcome("CCCCCCCCCCCC.5", audit.Outcome{Class: vocab.ClassFirstMint}), 1)) // outcome first
	b.WriteString(at(intent("CCCCCCCCCCCC.5"), 2))
	b.WriteString(at(intent("CCCCCCCCCCCC.6"), 9)) // within the grace: not unpaired
	old := intent("DDDDDDDDDDDD.1")
	b.WriteString(line(t, old, t0.Add(-40*24*time.Hour))) // before the window
	agreeScan(t, a.String(), b.String())
	agreeScan(t, malformed, a.String()+malformed)
	agreeScan(t, goodIntent+"\n"+goodIntent+"\n"+goodOutcome+"\n"+goodOutcome+"\n"+goodLimited+"\n"+goodIntent)
	// Many ids in one chunk of the compact set, out of order: past the
	// sorted array's size, into the bitmap.
	var big strings.Builder
	for i := 9000; i > 0; i-- { // ids up to 63000: one chunk of 2^16
		id := fmt.Sprintf("EEEEEEEEEEEE.%d", i*7)
		big.WriteString(at(intent(id), 0))
		if i%3 != 0 {
			big.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), 0))
		}
		if i%500 == 0 {
			big.WriteString(at(intent(id), 0))
			big.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), 0))
		}
	}
	agreeScan(t, big.String())
}

// FuzzScanAgreesWithReference: on any file content, both scans report the
// same.
func FuzzScanAgreesWithReference(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add([]byte(tc.line + "\n"))
	}
	f.Add([]byte(goodIntent + "\n" + goodOutcome + "\n" + goodLimited + "\n" + goodIntent))
	f.Add([]byte(goodIntent + "\n" + goodIntent + "\n" + goodOutcome + "\n" + goodOutcome + "\n"))
	f.Add([]byte(goodOutcome + "\n" + goodIntent + "\n" + goodOutcome + "\n"))
	f.Fuzz(func(t *testing.T, content []byte) { agreeScan(t, string(content)) })
}
