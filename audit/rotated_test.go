package audit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Two generation names, oldest first.
const (
	gen1 = "registrar-audit-20261201T080000Z-000001.jsonl"
	gen2 = "registrar-audit-20261201T090000Z-000002.jsonl"
)

// rotatedRec is a rotated record of gen1 with one named count and one
// other.
func rotatedRec() *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseAdmin,
		TS:             t0.Add(10 * time.Minute),
		CallerIdentity: audit.DaemonIdentity,
		Admin: &audit.Admin{Action: audit.ActionRotated, Rotated: audit.Rotated{
			File: gen1, Next: gen2, Rotation: 3, Folded: 1, Bytes: 65490,
			SHA256: strings.Repeat("9f", 32), Lines: 212, FirstTS: t0, LastTS: t0.Add(time.Hour),
			Counts: []audit.InvocationCount{
				{Identity: "unix-peer:uid=1000", Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 104},
				{Identity: "unix-peer:uid=1001", Verb: vocab.Deregister, Result: audit.ResultLimited, Invocations: 104},
				{Identity: "unix-peer:uid=1000", Verb: vocab.Mint, Result: audit.ResultRefused, Invocations: 2},
			},
			Others: []audit.InvocationCount{{Verb: vocab.Mint, Result: audit.ResultLimited, Invocations: 12}},
		}},
	}
}

func TestResultSpellingsAreTheOutcomeClassesAndLimited(t *testing.T) {
	for c := vocab.ClassFirstMint; c.Valid(); c++ {
		if got := audit.ResultOf(c).String(); got != c.String() {
			t.Errorf("ResultOf(%s) spells %q", c, got)
		}
	}
	if got := audit.ResultLimited.String(); got != "limited" {
		t.Errorf("ResultLimited spells %q, want limited", got)
	}
	if audit.Result(0).Valid() || audit.Result(audit.NumResults+1).Valid() {
		t.Error("a result outside 1..NumResults is valid")
	}
	if r, err := audit.ParseResult("limited"); err != nil || r != audit.ResultLimited {
		t.Errorf("ParseResult(limited) = %v, %v", r, err)
	}
}

// TestValidateRotated: every rule of the rotated subject names its field.
func TestValidateRotated(t *testing.T) {
	rot := func(r *audit.Record) *audit.Rotated { return &r.Admin.Rotated }
	cases := []struct {
		name    string
		mutate  func(r *audit.Record)
		field   string
		missing bool
		phase   bool // *PhaseError (else *FieldError)
	}{
		{"no file", func(r *audit.Record) { rot(r).File = "" }, "subject.file", true, true},
		{"no next", func(r *audit.Record) { rot(r).Next = "" }, "subject.next", true, true},
		{"rotation 0", func(r *audit.Record) { rot(r).Rotation = 0 }, "subject.rotation", true, true},
		{"no sha256", func(r *audit.Record) { rot(r).SHA256 = "" }, "subject.sha256", true, true},
		{"file not a generation", func(r *audit.Record) { rot(r).File = "registrar-audit.jsonl" }, "subject.file", false, false},
		{"file with a path", func(r *audit.Record) { rot(r).File = "../" + gen1 }, "subject.file", false, false},
		{"next not a generation", func(r *audit.Record) { rot(r).Next = "x" }, "subject.next", false, false},
		{"next before file", func(r *audit.Record) { rot(r).File, rot(r).Next = gen2, gen1 }, "subject.next", false, false},
		{"next is file", func(r *audit.Record) { rot(r).Next = gen1 }, "subject.next", false, false},
		{"folded as many as rotation", func(r *audit.Record) { rot(r).Folded = 3 }, "subject.folded", false, false},
		{"uppercase sha256", func(r *audit.Record) { rot(r).SHA256 = strings.Repeat("9F", 32) }, "subject.sha256", false, false},
		{"short sha256", func(r *audit.Record) { rot(r).SHA256 = "9f" }, "subject.sha256", false, false},
		{"first_ts alone", func(r *audit.Record) { rot(r).LastTS = time.Time{} }, "subject.last_ts", true, true},
		{"last_ts alone", func(r *audit.Record) { rot(r).FirstTS = time.Time{} }, "subject.last_ts", false, true},
		{"timestamps of no line", func(r *audit.Record) { rot(r).Lines = 0 }, "subject.first_ts", false, false},
		{"year 10000", func(r *audit.Record) { rot(r).LastTS = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "subject.last_ts", false, false},
		{"empty counts", func(r *audit.Record) { rot(r).Counts = []audit.InvocationCount{} }, "subject.counts", false, false},
		{"empty others", func(r *audit.Record) { rot(r).Others = []audit.InvocationCount{} }, "subject.others", false, false},
		{"count of 0", func(r *audit.Record) { rot(r).Counts[0].Invocations = 0 }, "subject.counts.invocations", false, false},
		{"count of no verb", func(r *audit.Record) { rot(r).Counts[0].Verb = 7 }, "subject.counts.verb", false, false},
		{"count of no outcome", func(r *audit.Record) { rot(r).Counts[0].Result = 0 }, "subject.counts.outcome", false, false},
		{"a key twice", func(r *audit.Record) { rot(r).Counts[2] = rot(r).Counts[0] }, "subject.counts", false, false},
		{"an other with an identity", func(r *audit.Record) { rot(r).Others[0].Identity = "x" }, "subject.others.identity", false, false},
		{"an other twice", func(r *audit.Record) { rot(r).Others = append(rot(r).Others, rot(r).Others[0]) }, "subject.others", false, false},
		{"an over-bound identity", func(r *audit.Record) { rot(r).Counts[0].Identity = strings.Repeat("x", 513) }, "subject.counts.identity", false, false},
		{"limits_reset with a file", func(r *audit.Record) {
			*r = *adminBase()
			r.Admin.File = gen1
		}, "subject.file", false, true},
		{"limits_reset with counts", func(r *audit.Record) {
			*r = *adminBase()
			r.Admin.Counts = rotatedRec().Admin.Counts
		}, "subject.counts", false, true},
		{"rotated with an identity", func(r *audit.Record) { r.Admin.Identity = "unix-peer:uid=1" }, "subject.identity", false, true},
		{"rotated with verbs", func(r *audit.Record) { r.Admin.Verbs = []vocab.Verb{vocab.Mint} }, "subject.verbs", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rotatedRec()
			tc.mutate(r)
			assertInvalid(t, r, tc.phase, tc.field, tc.missing)
		})
	}
}

// TestMarshalWritesRotatedCountsInOrder: counts the most invocations
// first (then identity, verb, outcome), others by verb and outcome,
// whatever order they came in; the caller's slices untouched.
func TestMarshalWritesRotatedCountsInOrder(t *testing.T) {
	r := rotatedRec()
	given := r.Admin.Counts[2]
	line := string(mustMarshal(t, r))
	want := `"counts":[{"identity":"unix-peer:uid=1000","verb":"mint","outcome":"first_mint","invocations":104},` +
		`{"identity":"unix-peer:uid=1001","verb":"deregister","outcome":"limited","invocations":104},` +
		`{"identity":"unix-peer:uid=1000","verb":"mint","outcome":"refused","invocations":2}]`
	if !strings.Contains(line, want) {
		t.Errorf("line %s\nwant counts %s", line, want)
	}
	r.Admin.Counts[0], r.Admin.Counts[2] = r.Admin.Counts[2], r.Admin.Counts[0]
	if again := string(mustMarshal(t, r)); again != line {
		t.Errorf("the order given changed the line:\n%s\n%s", again, line)
	}
	if r.Admin.Counts[0] != given {
		t.Error("Marshal reordered the caller's counts")
	}
	back, err := audit.Unmarshal([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Admin.Rotated; got.File != gen1 || got.Rotation != 3 || got.Folded != 1 || len(got.Counts) != 3 || got.Others[0].Invocations != 12 || !got.LastTS.Equal(t0.Add(time.Hour)) {
		t.Errorf("read back %+v", got)
	}
}

// TestARotatedRecordOfVeryManyIdentitiesStaysWithinMaxRecordBytes: with
// thousands of identities, each at the worst escaping, the line is cut to
// MaxRecordBytes by moving the smallest counts into others: the busiest
// identities are named, and no invocation is lost.
func TestARotatedRecordOfVeryManyIdentitiesStaysWithinMaxRecordBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   func(i int) string
	}{
		{"short identities", func(i int) string {
			return "unix-peer:uid=" + strings.Repeat("9", i%7) + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		}},
		{"identities at the worst escaping", func(i int) string {
			return strings.Repeat("\x01", audit.MaxFieldBytes-8) + string(rune('a'+i%26)) + strings.Repeat("b", i/26%7)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rotatedRec()
			r.Admin.Counts, r.Admin.Others = nil, nil
			var total uint64
			seen := map[string]bool{}
			for i := range 3000 {
				id := tc.id(i)
				if seen[id] {
					continue
				}
				seen[id] = true
				n := uint64(1 + i%50)
				total += n
				r.Admin.Counts = append(r.Admin.Counts, audit.InvocationCount{Identity: id, Verb: vocab.Verb(i % 2), Result: audit.ResultFirstMint, Invocations: n})
			}
			line := mustMarshal(t, r)
			if len(line) > audit.MaxRecordBytes {
				t.Fatalf("a %d-byte line, want at most MaxRecordBytes = %d", len(line), audit.MaxRecordBytes)
			}
			back, err := audit.Unmarshal(line)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			got := back.Admin.Rotated
			var sum uint64
			for _, c := range got.Counts {
				sum += c.Invocations
			}
			for _, o := range got.Others {
				sum += o.Invocations
			}
			if sum != total {
				t.Errorf("counts and others sum to %d invocations, want the %d given", sum, total)
			}
			if len(got.Counts) == 0 || len(got.Others) == 0 || len(got.Counts) >= len(seen) {
				t.Fatalf("%d counts named and %d others of %d keys: want some named, the rest in others", len(got.Counts), len(got.Others), len(seen))
			}
			if last, max := got.Counts[len(got.Counts)-1].Invocations, uint64(50); last != max && got.Counts[0].Invocations != max {
				t.Errorf("the busiest identities were not named first: first %d, last %d", got.Counts[0].Invocations, last)
			}
			t.Logf("%d of %d keys named in a %d-byte line", len(got.Counts), len(seen), len(line))
		})
	}
}

// TestMarshalWritesRotatedOthersInOrder: others by verb, then outcome,
// whatever order they came in; the caller's slice untouched.
func TestMarshalWritesRotatedOthersInOrder(t *testing.T) {
	r := rotatedRec()
	r.Admin.Others = []audit.InvocationCount{
		{Verb: vocab.Deregister, Result: audit.ResultFirstMint, Invocations: 1},
		{Verb: vocab.Mint, Result: audit.ResultLimited, Invocations: 12},
		{Verb: vocab.Mint, Result: audit.ResultRefused, Invocations: 3},
	}
	given := slices.Clone(r.Admin.Others)
	line := string(mustMarshal(t, r))
	want := `"others":[{"verb":"mint","outcome":"refused","invocations":3},{"verb":"mint","outcome":"limited","invocations":12},` +
		`{"verb":"deregister","outcome":"first_mint","invocations":1}]`
	if !strings.Contains(line, want) {
		t.Errorf("line %s\nwant others %s", line, want)
	}
	if !slices.Equal(r.Admin.Others, given) {
		t.Errorf("Marshal reordered the caller's others: %+v", r.Admin.Others)
	}
}

// TestARotatedRecordOverItsBoundByItsSmallestCountLosesThatCountAlone: a
// rotated record whose line is longer than the bound by exactly its
// smallest count (and that count's comma) moves that count alone into
// others, and its line is then exactly at the bound.
func TestARotatedRecordOverItsBoundByItsSmallestCountLosesThatCountAlone(t *testing.T) {
	bound := audit.MaxRecordBytes - audit.ChainSuffixBytes // what Marshal fits a rotated record to
	r := rotatedRec()
	smallest := audit.InvocationCount{Identity: "unix-peer:uid=1", Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 1}
	// others already hold the smallest count's key, with as many digits
	// after it is added: moving it makes the line no longer.
	r.Admin.Others = []audit.InvocationCount{{Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 5_000_000}}
	r.Admin.Counts = []audit.InvocationCount{smallest}
	base := len(mustMarshal(t, r))
	count := func(id string) audit.InvocationCount {
		return audit.InvocationCount{Identity: id, Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 2}
	}
	// cost is what count c adds to the line, its comma included.
	cost := func(c audit.InvocationCount) int {
		r.Admin.Counts = []audit.InvocationCount{c, smallest}
		return len(mustMarshal(t, r)) - base
	}
	smallestCost := cost(audit.InvocationCount{Identity: "unix-peer:uid=2", Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 1})
	want := bound + smallestCost // the line before fitting
	var counts []audit.InvocationCount
	for line := base; line < want; {
		id := fmt.Sprintf("unix-peer:uid=%04d:", len(counts))
		c := cost(count(id))
		if rest := want - line; rest < 2*c {
			id += strings.Repeat("x", rest-c) // the last identity takes what is left
			c = cost(count(id))
		}
		counts = append(counts, count(id))
		line += c
	}
	r.Admin.Counts = append(counts, smallest)
	line := mustMarshal(t, r)
	back, err := audit.Unmarshal(line)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Admin.Rotated
	if len(line) != bound || len(got.Counts) != len(counts) || got.Counts[len(got.Counts)-1].Invocations != 2 ||
		len(got.Others) != 1 || got.Others[0].Invocations != 5_000_001 {
		t.Errorf("a %d-byte line of %d counts, others %+v; want %d bytes, the %d counts of 2 invocations, the smallest in others",
			len(line), len(got.Counts), got.Others, bound, len(counts))
	}
}
