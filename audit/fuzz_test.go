//go:build unix

package audit_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// FuzzUnmarshal: the decoder never panics, rejects with a named rule, and
// accepts only canonical lines (re-encoding an accepted record gives back
// the same bytes).
func FuzzUnmarshal(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add([]byte(tc.line))
	}
	for _, gc := range goldenCases() {
		f.Add(goldenLine(f, gc))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := audit.Unmarshal(line)
		if err != nil {
			var de *audit.DecodeError
			if !errors.As(err, &de) || de.Rule == "" {
				t.Fatalf("got %T %v, want a *DecodeError with a rule", err, err)
			}
			return
		}
		if len(line) > audit.MaxRecordBytes {
			t.Fatalf("accepted a %d-byte line", len(line))
		}
		body := bytes.TrimSuffix(line, []byte{'\n'})
		if got := audit.Encode(r); !bytes.Equal(got[:len(got)-1], body) {
			t.Fatalf("accepted a non-canonical line\nline: %q\nre-encoded: %q", body, got)
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted a record that fails Validate: %v", err)
		}
	})
}

// cutRef is an independent statement of the bound: the longest prefix of
// at most 512 bytes that ends where a character (or an invalid byte) starts.
func cutRef(s string) string {
	if len(s) <= audit.MaxFieldBytes {
		return s
	}
	cut := 0
	for i := range s { // i visits every character start, invalid bytes one by one
		if i > audit.MaxFieldBytes {
			break
		}
		cut = i
	}
	return s[:cut]
}

// FuzzMarshal: whatever the free-text fields hold, the writer produces one
// bounded, valid, canonical line that decodes to the bounded values, and
// never forges a second record.
func FuzzMarshal(f *testing.F) {
	f.Add("unix-peer:uid=1000", "review", "h1", "", uint16(7), uint64(1), uint8(0), "q1")
	f.Add(forgedPayload, "\xff\xfe", "\u2028", "d\"\\", uint16(0), uint64(9), uint8(1), "q\"2")
	f.Add(overCaller, overService, overHost, overDetail, uint16(999), uint64(1<<63), uint8(1), "AAAAAAAAAAAA.10")
	f.Add(overLimitedCaller, "", "", "", uint16(0), uint64(42), uint8(2), "")
	f.Add("unix-peer:uid=1000", "", "", "", uint16(0), uint64(3), uint8(2|1<<6), "agents")
	f.Add("unix-peer:uid=0", "unix-peer:uid=1000", "", "", uint16(3), uint64(0), uint8(3), "")
	f.Add(overCaller, overLimitedCaller, "", "", uint16(0b1111), uint64(0), uint8(3), "")
	f.Add(audit.DaemonIdentity, "unix-peer:uid=1000", "", "\x01\xff", uint16(2), uint64(7), uint8(3|1<<5), "registrar-client:dns:h1")
	f.Fuzz(func(t *testing.T, caller, service, host, detail string, instance uint16, count uint64, sel uint8, id string) {
		var r *audit.Record
		kind := sel % 4
		if kind == 3 && sel&(1<<5) != 0 {
			kind = 4 // a rotated record
		}
		switch kind {
		case 0:
			// A mint's intent: detail stands for its spec.reload.
			r = intent(id)
			r.Requested = &audit.Requested{ServiceName: service, Host: host, Instance: uint32(instance), Reload: detail}
		case 1:
			r = outcome(id, audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonInvalidHost, Detail: detail})
			r.Requested = &audit.Requested{ServiceName: service, Host: host, Instance: uint32(instance), Reload: detail}
		case 2:
			r = limited(vocab.Bucket(sel>>7), count)
			r.Policy, r.Shadow = id, sel&(1<<6) != 0
		case 4:
			// sel&(1<<5): a rotated record counting the strings as
			// identities (one over the bound: refused, never cut).
			r = rotatedRec()
			r.Admin.Counts = nil
			for i, id := range []string{service, host, detail, id} {
				r.Admin.Counts = append(r.Admin.Counts, audit.InvocationCount{Identity: id, Verb: vocab.Verb(i % 2), Result: audit.Result(1 + i), Invocations: count + uint64(i)})
			}
			r.Admin.Folded = uint64(instance) % 3
		default:
			// An admin record: the subject's identity is service, its
			// lists the bits of instance (possibly empty: refused).
			var verbs []vocab.Verb
			var buckets []vocab.Bucket
			for v := range vocab.NumVerbs {
				if instance&(1<<v) != 0 {
					verbs = append(verbs, vocab.Verb(v))
				}
			}
			for b := range vocab.NumBuckets {
				if instance&(1<<(2+b)) != 0 {
					buckets = append(buckets, vocab.Bucket(b))
				}
			}
			r = adminReset(caller, service, verbs, buckets)
		}
		r.CallerIdentity = caller
		line, err := audit.Marshal(r)
		if err != nil {
			if !errors.Is(err, audit.ErrInvalidRecord) {
				t.Fatalf("Marshal: %v, want an ErrInvalidRecord or success", err)
			}
			return
		}
		if len(line) > audit.MaxRecordBytes || bytes.Count(line, []byte{'\n'}) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("got a %d-byte line with %d newlines", len(line), bytes.Count(line, []byte{'\n'}))
		}
		if !json.Valid(line) {
			t.Fatalf("invalid JSON: %q", line)
		}
		got, err := audit.Unmarshal(line)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(r)): %v\n%q", err, line)
		}
		check := func(name, got, orig string) {
			if want := string([]rune(cutRef(orig))); got != want {
				t.Errorf("%s: got %q, want %q", name, got, want)
			}
		}
		check("caller_identity", got.CallerIdentity, caller)
		if got.Requested != nil {
			check("service_name", got.Requested.ServiceName, service)
			check("host", got.Requested.Host, host)
			check("reload", got.Requested.Reload, detail)
		}
		if got.Outcome != nil && detail != "" {
			check("detail", got.Outcome.Detail, detail)
		}
		if got.Admin != nil && got.Admin.Action == audit.ActionLimitsReset {
			check("subject.identity", got.Admin.Identity, service)
		}
		if got.Admin != nil && got.Admin.Action == audit.ActionRotated {
			// Never cut: a count names an identity exactly as given.
			names := map[string]bool{}
			for _, c := range got.Admin.Counts {
				names[c.Identity] = true
			}
			for _, want := range []string{service, host, detail, id} {
				if !names[string([]rune(want))] {
					t.Errorf("rotated counts %+v do not name %q", got.Admin.Counts, want)
				}
			}
		}
		if got.Phase == audit.PhaseLimited && got.PolicyName() != cmp.Or(id, audit.DefaultPolicy) {
			t.Errorf("policy: got %q, want %q", got.PolicyName(), id)
		}
	})
}

const forgedPayload = "x\"}\n{\"record_version\":1,\"phase\":\"outcome\"}\n"

// FuzzScan: the scanner never panics or fails on any file content, and its
// counts agree with its lists.
func FuzzScan(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add([]byte(tc.line + "\n"))
	}
	f.Add([]byte(goodIntent + "\n" + goodOutcome + "\n" + goodLimited + "\n" + goodIntent))
	f.Add([]byte(goodIntent + "\n" + goodIntent + "\n\n\n"))
	f.Add([]byte(goodShadow + "\n" + goodAdmin + "\n" + goodLimited + "\n" + goodAdmin))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := filepath.Join(t.TempDir(), "audit")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, audit.ActiveFileName), content, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		var byRule uint64
		for _, n := range rep.MalformedByRule {
			byRule += n
		}
		if byRule != rep.MalformedRecords || uint64(len(rep.Malformed)) != min(rep.MalformedRecords, audit.MaxReportedLines) ||
			uint64(len(rep.Unpaired)) != min(rep.IntentWithoutOutcome, audit.MaxReportedLines) {
			t.Fatalf("inconsistent report: %+v", rep)
		}
		if lines := uint64(bytes.Count(content, []byte{'\n'})); rep.MalformedRecords > lines+1 {
			t.Fatalf("%d malformed from %d lines", rep.MalformedRecords, lines)
		}
	})
}

// FuzzScanDirectory fills a record directory with entries named by the
// input (one name per line; a name ending in "/" is a directory) and checks
// the enumeration's invariants: the scan never fails or panics on a
// readable directory, every entry is either read or listed as skipped
// exactly once, a missing active file in a non-empty directory is always an
// anomaly, and every generation gap names a generation.
func FuzzScanDirectory(f *testing.F) {
	f.Add("registrar-audit.jsonl\nregistrar-audit-20260823T120000Z-000001.jsonl\nregistrar-audit-20260823T120001Z-000003.jsonl")
	f.Add("registrar-audit.jsonl.1\nnotes.txt\nsub/")
	f.Add("registrar-audit-20260823T120000Z-999999.jsonl\nregistrar-audit-20260823T120001Z-000000.jsonl\nregistrar-audit-20260823T115959Z-000004.jsonl/")
	f.Add("registrar-audit.jsonl/\nregistrar-audit-99999999T999999Z-000001.jsonl")
	f.Fuzz(func(t *testing.T, names string) {
		dir := filepath.Join(t.TempDir(), "audit")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		made := map[string]bool{}
		for i, name := range strings.Split(names, "\n") {
			if i == 32 {
				break
			}
			isDir := strings.HasSuffix(name, "/")
			name = strings.TrimSuffix(name, "/")
			if name == "" || name == "." || name == ".." || len(name) > 200 || strings.ContainsAny(name, "/\x00") || made[name] {
				continue
			}
			p := filepath.Join(dir, name)
			var err error
			if isDir {
				err = os.Mkdir(p, 0o700)
			} else {
				err = os.WriteFile(p, []byte(goodIntent+"\n"), 0o600)
			}
			if err != nil {
				continue // a name the file system refuses
			}
			made[name] = true
		}
		rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		seen := map[string]int{}
		for _, n := range rep.Files {
			seen[n]++
		}
		for _, s := range rep.Skipped {
			seen[s.Name]++
			if s.Reason == "" {
				t.Errorf("skipped %s without a reason", s.Name)
			}
		}
		for n := range made {
			if seen[n] != 1 {
				t.Errorf("entry %q accounted for %d times (files %v, skipped %+v)", n, seen[n], rep.Files, rep.Skipped)
			}
		}
		if len(seen) != len(made) {
			t.Errorf("report names %d entries, the directory has %d", len(seen), len(made))
		}
		activeRead := false
		for _, n := range rep.Files {
			activeRead = activeRead || n == audit.ActiveFileName
		}
		missing := false
		for _, a := range rep.StoreAnomalies {
			switch a.Kind {
			case audit.AnomalyMissingActiveFile:
				missing = true
			case audit.AnomalyGenerationGap:
				if !strings.HasPrefix(a.File, "registrar-audit-") || a.Detail == "" {
					t.Errorf("gap anomaly %+v", a)
				}
			}
		}
		if want := len(made) > 0 && !activeRead; missing != want {
			t.Errorf("missing_active_file reported %v, want %v (made %v)", missing, want, made)
		}
		if len(rep.StoreAnomalies) > 0 && !rep.Anomalies() {
			t.Error("store anomalies without Anomalies()")
		}
	})
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

// FuzzScanAgreesWithReference: on any file content, both scans report the
// same.
func FuzzScanAgreesWithReference(f *testing.F) {
	for _, tc := range decodeCases(f) {
		f.Add([]byte(tc.line + "\n"))
	}
	f.Add([]byte(goodIntent + "\n" + goodOutcome + "\n" + goodLimited + "\n" + goodIntent))
	f.Add([]byte(goodIntent + "\n" + goodIntent + "\n" + goodOutcome + "\n" + goodOutcome + "\n"))
	f.Add([]byte(goodOutcome + "\n" + goodIntent + "\n" + goodOutcome + "\n"))
	f.Add([]byte(goodShadow + "\n" + goodAdmin + "\n" + goodLimited + "\n" + goodShadow + "\n"))
	f.Fuzz(func(t *testing.T, content []byte) { agreeScan(t, string(content)) })
}

// FuzzVerify: Verify never panics or fails on a readable store of any
// content (a generation and the active file), finds in a store holding no
// rotated record only that its generation is not the first, and keeps its
// counts and lists consistent.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(goodRotated+"\n"), []byte(goodIntent+"\n"+goodRotated+"\n"))
	f.Add([]byte(goodIntent+"\n"), []byte(strings.Replace(goodRotated, `"rotation":3,"folded":1`, `"rotation":2,"folded":0`, 1)+"\n"))
	f.Add([]byte(goodAdmin+"\n"+goodRotated), []byte("{}\n"+goodRotated+"\n"+goodRotated+"\n"))
	f.Fuzz(func(t *testing.T, gen, active []byte) {
		dir := filepath.Join(t.TempDir(), "audit")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// The generation named next by goodRotated, so chains can hold.
		if err := os.WriteFile(filepath.Join(dir, "registrar-audit-20261201T090000Z-000002.jsonl"), gen, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, audit.ActiveFileName), active, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: dir})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if uint64(len(rep.Problems)) != min(rep.ProblemCount, audit.MaxReportedLines) || rep.OK() != (rep.ProblemCount == 0) {
			t.Fatalf("inconsistent report: %+v", rep)
		}
		for _, p := range rep.Problems {
			if rep.RotatedRecords == 0 && p.Kind != audit.VerifyUnrecordedDeletion {
				t.Fatalf("a store without rotated records (its generation numbered 2): %+v", rep.Problems)
			}
		}
		for _, p := range rep.Problems {
			if p.Kind == "" || p.File == "" || p.Detail == "" {
				t.Fatalf("a problem without kind, file or detail: %+v", p)
			}
		}
	})
}
