package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestEnumSpellingsAreTheSpecs(t *testing.T) {
	for p, want := range map[audit.Phase]string{audit.PhaseIntent: "intent", audit.PhaseOutcome: "outcome", audit.PhaseLimited: "limited", audit.PhaseAdmin: "admin"} {
		got, err := p.MarshalText()
		if err != nil || string(got) != want {
			t.Errorf("MarshalText = %q, %v; want %q", got, err, want)
		}
		var back audit.Phase
		if err := back.UnmarshalText([]byte(want)); err != nil || back != p {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", want, back, err, p)
		}
	}
	if audit.Phase(0).Valid() {
		t.Error("the zero Phase is valid; want it invalid")
	}
	if _, err := audit.Phase(0).MarshalText(); err == nil {
		t.Error("Phase(0).MarshalText succeeded; want an error")
	}
	for _, bad := range []string{"", "Intent", "INTENT", "intent ", "limit"} {
		if _, err := audit.ParsePhase(bad); err == nil {
			t.Errorf("ParsePhase(%q) succeeded; want an error", bad)
		}
	}
}

func TestValidatePhaseConsistency(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(r *audit.Record)
		base    func() *audit.Record
		field   string
		missing bool
		phase   bool // *PhaseError (else *FieldError)
	}{
		{"zero record has no phase", func(r *audit.Record) { *r = audit.Record{} }, nil, "phase", false, false},
		{"intent without request_id", func(r *audit.Record) { r.RequestID = "" }, nil, "request_id", true, true},
		{"intent without requested", func(r *audit.Record) { r.Requested = nil }, nil, "requested", true, true},
		{"intent with an outcome", func(r *audit.Record) { r.Outcome = &audit.Outcome{Class: vocab.ClassFirstMint} }, nil, "outcome", false, true},
		{"intent with a count", func(r *audit.Record) { r.Count = 1 }, nil, "count", false, true},
		{"intent with a bucket", func(r *audit.Record) { r.LimitedBucket = vocab.Admission }, nil, "limited_bucket", false, true},
		{"intent with a window", func(r *audit.Record) { r.WindowEnd = t0 }, nil, "window_end", false, true},
		{"intent with an invalid verb", func(r *audit.Record) { r.Verb = 7 }, nil, "verb", false, false},
		{"request_id with a space", func(r *audit.Record) { r.RequestID = "a b" }, nil, "request_id", false, false},
		{"request_id of 65 bytes", func(r *audit.Record) { r.RequestID = strings.Repeat("a", 65) }, nil, "request_id", false, false},
		{"registration_id uppercase", func(r *audit.Record) { r.RegistrationID = "H1-review" }, nil, "registration_id", false, false},
		{"registration_id of 132 bytes", func(r *audit.Record) { r.RegistrationID = strings.Repeat("a", 132) }, nil, "registration_id", false, false},
		{"year 10000", func(r *audit.Record) { r.TS = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, nil, "ts", false, false},
		{"outcome without outcome", func(r *audit.Record) { r.Outcome = nil }, outcomeBase, "outcome", true, true},
		{"refused without reason", func(r *audit.Record) { r.Outcome = &audit.Outcome{Class: vocab.ClassRefused} }, outcomeBase, "outcome.reason", true, true},
		{"refused with an invalid reason", func(r *audit.Record) { r.Outcome = &audit.Outcome{Class: vocab.ClassRefused, Reason: 17} }, outcomeBase, "outcome.reason", false, false},
		{"success with a reason", func(r *audit.Record) { r.Outcome.Reason = vocab.ReasonInvalidHost }, outcomeBase, "outcome.reason", false, true},
		{"success with a detail", func(r *audit.Record) { r.Outcome.Detail = "x" }, outcomeBase, "outcome.detail", false, true},
		{"invalid class", func(r *audit.Record) { r.Outcome.Class = 0 }, outcomeBase, "outcome.class", false, false},
		{"outcome with a window", func(r *audit.Record) { r.WindowStart = t0 }, outcomeBase, "window_start", false, true},
		{"limited with request_id", func(r *audit.Record) { r.RequestID = "x" }, limitedBase, "request_id", false, true},
		{"limited with requested", func(r *audit.Record) { r.Requested = &audit.Requested{} }, limitedBase, "requested", false, true},
		{"limited with registration_id", func(r *audit.Record) { r.RegistrationID = "x" }, limitedBase, "registration_id", false, true},
		{"limited with outcome", func(r *audit.Record) { r.Outcome = &audit.Outcome{Class: vocab.ClassFirstMint} }, limitedBase, "outcome", false, true},
		{"limited with count 0", func(r *audit.Record) { r.Count = 0 }, limitedBase, "count", false, true},
		{"limited with an invalid bucket", func(r *audit.Record) { r.LimitedBucket = 2 }, limitedBase, "limited_bucket", false, false},
		{"limited without window_start", func(r *audit.Record) { r.WindowStart = time.Time{} }, limitedBase, "window_start", true, true},
		{"limited with end before start", func(r *audit.Record) { r.WindowEnd = r.WindowStart.Add(-time.Millisecond) }, limitedBase, "window_end", false, true},
		{"truncated with an unknown path", func(r *audit.Record) {
			r.Truncated = map[string]audit.Truncation{"verb": {FullSHA256: strings.Repeat("a", 64), FullBytes: 600}}
		}, nil, "truncated", false, false},
		{"deregister with a reload", func(r *audit.Record) { r.Verb, r.Requested.Reload = vocab.Deregister, "systemctl reload review" }, nil, "requested.reload", false, true},
		{"deregister outcome with a reload", func(r *audit.Record) { r.Verb, r.Requested.Reload = vocab.Deregister, "x" }, outcomeBase, "requested.reload", false, true},
		{"truncated for an absent reload", func(r *audit.Record) {
			r.Truncated = map[string]audit.Truncation{audit.PathRequestedReload: {FullSHA256: strings.Repeat("a", 64), FullBytes: 600}}
		}, nil, "truncated.requested.reload", false, true},
		{"limited truncated for an absent field", func(r *audit.Record) {
			r.Truncated = map[string]audit.Truncation{audit.PathRequestedHost: {FullSHA256: strings.Repeat("a", 64), FullBytes: 600}}
		}, limitedBase, "truncated.requested.host", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			if base == nil {
				base = func() *audit.Record { return intent("q1") }
			}
			r := base()
			tc.mutate(r)
			assertInvalid(t, r, tc.phase, tc.field, tc.missing)
		})
	}
}

func outcomeBase() *audit.Record {
	return outcome("q1", audit.Outcome{Class: vocab.ClassFirstMint})
}

func limitedBase() *audit.Record { return limited(vocab.Admission, 3) }

func TestValidateAcceptsWhatTheStoreCompletes(t *testing.T) {
	r := intent("q1")
	r.TS = time.Time{}                             // the store stamps it
	r.CallerIdentity = strings.Repeat("x", 4*1024) // the store cuts it
	r.Requested.ServiceName = ""                   // recorded as received
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate = %v; want nil", err)
	}
	if _, err := audit.Marshal(r); err == nil {
		t.Error("Marshal accepted a zero ts; want an error (only the store stamps)")
	}
}

// Each field's rule admits the ends of its range: a request_id of the
// first and last printable ASCII bytes, a registration_id of each end of
// [a-z0-9-], a timestamp in year 0001; each is written and read back.
func TestValidateAdmitsTheEndsOfEachRange(t *testing.T) {
	year1 := time.Date(1, 1, 1, 0, 0, 0, 1_000_000, time.UTC) // not the zero time: a stamped one
	r := outcome("!q~", audit.Outcome{Class: vocab.ClassFirstMint})
	r.RegistrationID = "a-z-0-9"
	r.TS = year1
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate = %v; want nil", err)
	}
	got, err := audit.Unmarshal(mustMarshal(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestID != "!q~" || got.RegistrationID != "a-z-0-9" || !got.TS.Equal(year1) {
		t.Errorf("read back request_id %q, registration_id %q, ts %v", got.RequestID, got.RegistrationID, got.TS)
	}
}

func TestMarshalRejectsCallerTruncated(t *testing.T) {
	r := intent("q1")
	r.Truncated = map[string]audit.Truncation{}
	if _, err := audit.Marshal(r); err != nil {
		t.Errorf("Marshal with an empty Truncated map = %v; want nil", err)
	}
	r.Truncated = map[string]audit.Truncation{audit.PathCallerIdentity: {FullSHA256: strings.Repeat("a", 64), FullBytes: 900}}
	var fe *audit.FieldError
	if _, err := audit.Marshal(r); !errors.As(err, &fe) || fe.Field != "truncated" {
		t.Errorf("Marshal with caller-set Truncated = %v; want FieldError on truncated", err)
	}
}

func TestTimestampsAreCanonicalMillisecondUTC(t *testing.T) {
	r := intent("q1")
	r.TS = time.Date(2026, 1, 2, 3, 4, 5, 678_999_999, time.FixedZone("X", -5*3600))
	line := mustMarshal(t, r)
	if want := `"ts":"2026-01-02T08:04:05.678Z"`; !bytes.Contains(line, []byte(want)) {
		t.Errorf("got %s, want it to contain %s", line, want)
	}
	l := limited(vocab.PredecisionRefusal, 1)
	l.WindowStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.WindowEnd = l.WindowStart.Add(999 * time.Microsecond) // same millisecond after truncation
	line = mustMarshal(t, l)
	if want := `"window_start":"2026-01-02T03:04:05.000Z","window_end":"2026-01-02T03:04:05.000Z"`; !bytes.Contains(line, []byte(want)) {
		t.Errorf("got %s, want it to contain %s", line, want)
	}
}

// TestFieldBound checks the cut: on a UTF-8 boundary at or below 512 bytes,
// a straddling character dropped, invalid bytes counted as one byte, and
// the digest and length of the complete original.
func TestFieldBound(t *testing.T) {
	cases := []struct {
		name     string
		value    string
		wantLen  int // raw prefix length; -1 = not cut
		wantTrun bool
	}{
		{"512 bytes is not cut", strings.Repeat("a", 512), -1, false},
		{"513 bytes is cut to 512", strings.Repeat("a", 513), 512, true},
		{"2-byte char straddling", strings.Repeat("a", 511) + "é", 511, true},
		{"3-byte char straddling", strings.Repeat("a", 510) + "€x", 510, true},
		{"4-byte char straddling", strings.Repeat("a", 509) + "😀", 509, true},
		{"4-byte char ending at the bound", strings.Repeat("a", 508) + "😀x", 512, true},
		{"invalid bytes count as one", strings.Repeat("\xff", 600), 512, true},
		{"truncated sequence counts bytewise", strings.Repeat("a", 510) + "\xe2\x82" + "zz", 512, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := intent("q1")
			r.CallerIdentity = tc.value
			line := mustMarshal(t, r)
			if r.CallerIdentity != tc.value || r.Truncated != nil {
				t.Fatal("Marshal mutated the caller's record")
			}
			got, err := audit.Unmarshal(line)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			tr, cut := got.Truncated[audit.PathCallerIdentity]
			if cut != tc.wantTrun {
				t.Fatalf("truncated entry present = %v, want %v", cut, tc.wantTrun)
			}
			want := tc.value
			if cut {
				want = tc.value[:tc.wantLen]
				sum := sha256.Sum256([]byte(tc.value))
				if tr.FullSHA256 != hex.EncodeToString(sum[:]) || tr.FullBytes != uint64(len(tc.value)) {
					t.Errorf("got truncation %+v, want sha256 %x and %d bytes of the complete original", tr, sum, len(tc.value))
				}
			}
			// The reader sees invalid bytes as U+FFFD, one per byte.
			if wantDecoded := string([]rune(want)); got.CallerIdentity != wantDecoded {
				t.Errorf("got caller_identity of %d bytes, want %d (prefix %d)", len(got.CallerIdentity), len(wantDecoded), len(want))
			}
			if utf8.ValidString(tc.value) && !utf8.ValidString(want) {
				t.Error("a valid value was split inside a character")
			}
		})
	}
}

func TestEveryBoundedFieldIsCut(t *testing.T) {
	long := strings.Repeat("z", 1000)
	r := outcome("q1", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonInvalidHost, Detail: long})
	r.CallerIdentity, r.Requested.ServiceName, r.Requested.Host, r.Requested.Reload = long, long, long, long
	got, err := audit.Unmarshal(mustMarshal(t, r))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{audit.PathCallerIdentity, audit.PathRequestedServiceName, audit.PathRequestedHost, audit.PathRequestedReload, audit.PathOutcomeDetail} {
		if tr, ok := got.Truncated[path]; !ok || tr.FullBytes != 1000 {
			t.Errorf("truncated[%q] = %+v, %v; want full_bytes 1000", path, tr, ok)
		}
	}
	for name, v := range map[string]string{"caller": got.CallerIdentity, "service": got.Requested.ServiceName, "host": got.Requested.Host, "reload": got.Requested.Reload, "detail": got.Outcome.Detail} {
		if len(v) != audit.MaxFieldBytes {
			t.Errorf("%s: got %d bytes, want %d", name, len(v), audit.MaxFieldBytes)
		}
	}
}

// TestInstanceOutsideAComponentRangeIsRecordable: the verb layer refuses an
// instance above 999 as service_instance_mismatch, and that refusal must be
// recordable with the instance the caller actually sent.
func TestInstanceOutsideAComponentRangeIsRecordable(t *testing.T) {
	r := intent("q1")
	r.Requested.Instance = 1000
	line := mustMarshal(t, r)
	got, err := audit.Unmarshal(line)
	if err != nil || got.Requested.Instance != 1000 {
		t.Fatalf("round trip of instance 1000: %+v, %v", got, err)
	}
}

// TestCallerSubuidIsOnTheCallsRecordsOnly: the subordinate uid the kernel
// reported rides on an invocation's intent and outcome, round-trips, and
// is refused on the records that count or act per identity.
func TestCallerSubuidIsOnTheCallsRecordsOnly(t *testing.T) {
	for _, r := range []*audit.Record{intent("q1"), outcomeBase()} {
		r.CallerSubuid = 100009
		line := mustMarshal(t, r)
		if want := `"caller_identity":"unix-peer:uid=1000","caller_subuid":100009,"requested":`; !bytes.Contains(line, []byte(want)) {
			t.Errorf("%s: got %s, want it to contain %s", r.Phase, line, want)
		}
		got, err := audit.Unmarshal(line)
		if err != nil || got.CallerSubuid != 100009 {
			t.Errorf("%s: round trip %+v, %v; want caller_subuid 100009", r.Phase, got, err)
		}
		r.CallerSubuid = 0
		if line := mustMarshal(t, r); bytes.Contains(line, []byte("caller_subuid")) {
			t.Errorf("%s: a zero caller_subuid is written: %s", r.Phase, line)
		}
	}
	for _, r := range []*audit.Record{limitedBase(), adminReset("unix-peer:uid=0", "unix-peer:uid=1000", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission})} {
		r.CallerSubuid = 100009
		var pe *audit.PhaseError
		if err := r.Validate(); !errors.As(err, &pe) || pe.Field != "caller_subuid" {
			t.Errorf("%s with caller_subuid: Validate = %v, want a PhaseError on caller_subuid", r.Phase, err)
		}
	}
}

// TestMaxRecordBytesIsHonest builds each phase's worst case: every field at
// its bound and every bounded byte escaped to six bytes, all truncated.
func TestMaxRecordBytesIsHonest(t *testing.T) {
	worst := strings.Repeat("\x01", 600) // each byte escapes to \u0001
	invalid := strings.Repeat("\xff", 600)
	maxTS := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)

	out := &audit.Record{
		Phase: audit.PhaseOutcome, TS: maxTS, RequestID: strings.Repeat(`"`, audit.MaxRequestIDBytes),
		Verb: vocab.Mint, CallerIdentity: worst, CallerSubuid: audit.MaxCallerSubuid,
		Requested:      &audit.Requested{ServiceName: invalid, Host: worst, Instance: audit.MaxInstance, Reload: worst},
		RegistrationID: strings.Repeat("a", audit.MaxRegistrationIDBytes),
		Outcome:        &audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonSpecIdentityDisagreement, Detail: worst},
	}
	in := *out
	in.Phase, in.Outcome = audit.PhaseIntent, nil
	// A deregister's outcome: six bytes more verb, and no reload.
	dereg := *out
	dereg.Verb = vocab.Deregister
	dereg.Requested = &audit.Requested{ServiceName: invalid, Host: worst, Instance: audit.MaxInstance}
	lim := limited(vocab.PredecisionRefusal, ^uint64(0))
	lim.Verb, lim.CallerIdentity, lim.TS, lim.WindowEnd = vocab.Deregister, worst, maxTS, maxTS
	shadow := *lim
	shadow.Policy, shadow.Shadow = strings.Repeat(`"`, audit.MaxPolicyBytes), true // '"' escapes to 2 bytes
	adm := adminReset(worst, worst, []vocab.Verb{vocab.Mint, vocab.Deregister}, []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission})
	adm.TS = maxTS

	// full_bytes is at most 20 digits; a 600-byte original has 3.
	const unusedDigits = 20 - 3
	cases := []struct {
		name    string
		rec     *audit.Record
		slack   int // bytes the worst case cannot reach in a test
		exact   bool
		chained bool // as a sealed store writes it
	}{
		{"mint outcome of a sealed store (the largest line)", out, 5 * unusedDigits, true, true},
		{"mint outcome (the largest phase)", out, 5*unusedDigits + audit.ChainSuffixBytes, true, false},
		{"intent", &in, 0, false, false},
		{"deregister outcome (no reload)", &dereg, 0, false, false},
		{"limited (counted)", lim, 0, false, false},
		{"limited shadow, the longest policy", &shadow, 0, false, false},
		{"admin (two bounded fields)", adm, 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line := mustMarshal(t, tc.rec)
			if tc.chained {
				line = audit.WithChain(line, strings.Repeat("f", audit.ChainHexLen))
			}
			if len(line) > audit.MaxRecordBytes {
				t.Fatalf("got a %d-byte line, want at most MaxRecordBytes = %d", len(line), audit.MaxRecordBytes)
			}
			if tc.exact && len(line)+tc.slack != audit.MaxRecordBytes {
				t.Errorf("worst case is %d bytes (+%d unreachable digits); want exactly MaxRecordBytes = %d", len(line), tc.slack, audit.MaxRecordBytes)
			}
			if _, err := audit.Unmarshal(line); err != nil {
				t.Errorf("Unmarshal(worst case): %v", err)
			}
		})
	}
	t.Logf("MaxRecordBytes = %d", audit.MaxRecordBytes)
}

// A line of exactly MaxRecordBytes is within the bound and written as it
// is. Only a rotated record reaches it, its counts naming any identities
// (the other phases' worst cases stop short by the digits of full_bytes
// no original can have): its counts are filled to the byte here. Marshal
// writes it unchained, MaxRecordBytes less ChainSuffixBytes, so that a
// sealed store's chain value brings it to MaxRecordBytes exactly.
func TestALineOfExactlyMaxRecordBytesIsWritten(t *testing.T) {
	const unchained = audit.MaxRecordBytes - audit.ChainSuffixBytes
	r := rotatedRec()
	r.Admin.Counts = nil
	length := func() int {
		t.Helper()
		line, err := audit.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return len(line)
	}
	for i := 0; unchained-length() > 400; i++ {
		id := "unix-peer:uid=" + strconv.Itoa(2000+i) + ":" + strings.Repeat("a", 180)
		r.Admin.Counts = append(r.Admin.Counts, audit.InvocationCount{Identity: id, Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 10})
	}
	r.Admin.Counts = append(r.Admin.Counts, audit.InvocationCount{Identity: "p", Verb: vocab.Deregister, Result: audit.ResultIdentityRemoved, Invocations: 1})
	pad := &r.Admin.Counts[len(r.Admin.Counts)-1]
	grow := unchained - length()
	if grow < 0 || len(pad.Identity)+grow > audit.MaxFieldBytes {
		t.Fatalf("the test's record leaves %d bytes to fill with one identity", grow)
	}
	pad.Identity += strings.Repeat("p", grow)
	line, err := audit.Marshal(r)
	if err != nil || len(line) != unchained {
		t.Fatalf("a record of exactly MaxRecordBytes = %d less a chain value (%d): a %d-byte line, %v; want it written", audit.MaxRecordBytes, unchained, len(line), err)
	}
	sealed := audit.WithChain(line, strings.Repeat("0f", audit.ChainHexLen/2))
	if len(sealed) != audit.MaxRecordBytes {
		t.Fatalf("sealed, the line is %d bytes; want exactly MaxRecordBytes = %d", len(sealed), audit.MaxRecordBytes)
	}
	for _, l := range [][]byte{line, sealed} {
		if _, err := audit.Unmarshal(l); err != nil {
			t.Fatalf("Unmarshal(a %d-byte line): %v", len(l), err)
		}
	}
	back, err := audit.Unmarshal(line)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Admin.Rotated; len(got.Counts) != len(r.Admin.Counts) || len(got.Others) != len(r.Admin.Others) {
		t.Errorf("read back %d counts and %d others, want the %d and %d written, none moved into others", len(got.Counts), len(got.Others), len(r.Admin.Counts), len(r.Admin.Others))
	}
}

// TestHostileStringsStayOneLine puts line breaks, quotes, control bytes,
// invalid UTF-8 and a forged record into every free-text field: the line
// stays one JSON object on one line and decodes to the same values.
func TestHostileStringsStayOneLine(t *testing.T) {
	forged := "x\"}\n{\"record_version\":1,\"phase\":\"outcome\",\"ts\":\"2026-08-23T12:34:56.789Z\"}\n"
	payloads := []string{
		forged,
		"\r\n\r\n",
		"\x00\x01\x08\x0b\x0c\x1b[31m\x1f\x7f",
		"\\\"\\\\\"",
		"\xff\xfe\xc3\x28\xe2\x82",
		"\x80 the first byte past ASCII, alone",
		"line\u2028separator\u2029paragraph\u0085nel",
		"\ufffd real replacement char",
		"</script><!--&amp;",
	}
	fields := []struct {
		name string
		set  func(r *audit.Record, v string)
		get  func(r *audit.Record) string
	}{
		{"caller_identity", func(r *audit.Record, v string) { r.CallerIdentity = v }, func(r *audit.Record) string { return r.CallerIdentity }},
		{"requested.service_name", func(r *audit.Record, v string) { r.Requested.ServiceName = v }, func(r *audit.Record) string { return r.Requested.ServiceName }},
		{"requested.host", func(r *audit.Record, v string) { r.Requested.Host = v }, func(r *audit.Record) string { return r.Requested.Host }},
		{"outcome.detail", func(r *audit.Record, v string) { r.Outcome.Detail = v }, func(r *audit.Record) string { return r.Outcome.Detail }},
	}
	for _, f := range fields {
		for i, p := range payloads {
			t.Run(f.name+"/"+string(rune('a'+i)), func(t *testing.T) {
				r := outcome("q1", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonInvalidHost, Detail: "d"})
				f.set(r, p)
				line := mustMarshal(t, r)
				if n := bytes.Count(line, []byte{'\n'}); n != 1 || line[len(line)-1] != '\n' {
					t.Fatalf("got %d newlines (last byte %q), want exactly one, at the end", n, line[len(line)-1])
				}
				for _, c := range line[:len(line)-1] {
					if c < 0x20 || c == 0x7f {
						t.Fatalf("raw control byte %#x in line %q", c, line)
					}
				}
				if !utf8.Valid(line) || !json.Valid(line) {
					t.Fatalf("line is not valid UTF-8 JSON: %q", line)
				}
				got, err := audit.Unmarshal(line)
				if err != nil {
					t.Fatalf("Unmarshal: %v", err)
				}
				if want := string([]rune(p)); f.get(got) != want {
					t.Errorf("got %q, want %q", f.get(got), want)
				}
				// Stored, it is one record, not two.
				s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
				appendOK(t, s, r)
				rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Records[audit.PhaseOutcome-1] != 1 || rep.MalformedRecords != 0 || len(lines(readActive(t, dir))) != 1 {
					t.Errorf("got %d outcomes, %d malformed; want 1 outcome, 0 malformed", rep.Records[audit.PhaseOutcome-1], rep.MalformedRecords)
				}
			})
		}
	}
}

// assertInvalid checks that r fails validation with an ErrInvalidRecord
// naming field (a PhaseError, with missing, when phase; a FieldError
// otherwise), and that Marshal refuses it too.
func assertInvalid(t *testing.T, r *audit.Record, phase bool, field string, missing bool) {
	t.Helper()
	err := r.Validate()
	if !errors.Is(err, audit.ErrInvalidRecord) {
		t.Fatalf("Validate = %v; want an ErrInvalidRecord", err)
	}
	var pe *audit.PhaseError
	var fe *audit.FieldError
	switch {
	case phase && errors.As(err, &pe):
		if pe.Field != field || pe.Missing != missing {
			t.Errorf("got PhaseError{Field: %q, Missing: %v}, want {%q, %v} (%v)", pe.Field, pe.Missing, field, missing, err)
		}
	case !phase && errors.As(err, &fe):
		if fe.Field != field {
			t.Errorf("got FieldError{Field: %q}, want %q (%v)", fe.Field, field, err)
		}
	default:
		t.Errorf("got %T %v; want phase error %v for %s", err, err, phase, field)
	}
	if _, merr := audit.Marshal(r); merr == nil {
		t.Error("Marshal succeeded on an invalid record")
	}
}
