//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// answer is one invocation of h1-review-007 in a store: its intent at
// t0+at and, unless class is 0, its outcome took (default 100 ms).
type answer struct {
	at, took time.Duration
	class    vocab.OutcomeClass
}

var crossSeq int

// storeOf writes the answers as one store's lines.
func storeOf(t *testing.T, as ...answer) string {
	t.Helper()
	var b strings.Builder
	for _, a := range as {
		crossSeq++
		id := fmt.Sprintf("X%d", crossSeq)
		in := intent(id)
		if a.class == vocab.ClassIdentityRemoved || a.class == vocab.ClassIdempotentAlreadyAbsent {
			in.Verb = vocab.Deregister
		}
		b.WriteString(line(t, in, t0.Add(a.at)))
		if a.class == 0 {
			continue
		}
		o := audit.Outcome{Class: a.class}
		if a.class == vocab.ClassRefused {
			o.Reason = vocab.ReasonStoredSpecConflict
		}
		out := outcome(id, o)
		out.Verb = in.Verb
		b.WriteString(line(t, out, t0.Add(a.at+cmpOr(a.took, 100*time.Millisecond))))
	}
	return writeStore(t, b.String())
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

const (
	fm = vocab.ClassFirstMint
	rm = vocab.ClassIdempotentRemint
	rv = vocab.ClassIdentityRemoved
	aa = vocab.ClassIdempotentAlreadyAbsent
)

func scanStores(t *testing.T, skew time.Duration, dirs ...string) *audit.MultiReport {
	t.Helper()
	m, err := audit.ScanStores(context.Background(), audit.ScanOptions{Now: now, ClockSkew: skew}, dirs)
	if err != nil {
		t.Fatalf("ScanStores: %v", err)
	}
	return m
}

func findingKinds(m *audit.MultiReport) []string {
	var out []string
	for _, f := range m.Cross.Findings {
		out = append(out, string(f.Kind))
	}
	return out
}

// TestScanStoresFindsWhatOnlyTheStoresTogetherShow: each finding, from two
// stores each clean alone, and the histories that fit, sequential or
// concurrent, which are none.
func TestScanStoresFindsWhatOnlyTheStoresTogetherShow(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		a, b []answer
		skew time.Duration
		want []string
	}{
		{"a history that fits, spread over both",
			[]answer{{0, 0, fm}, {20 * s, 0, rv}, {40 * s, 0, fm}}, []answer{{10 * s, 0, rm}, {30 * s, 0, aa}}, 0, nil},
		{"two first_mints, no removal between",
			[]answer{{0, 0, fm}}, []answer{{10 * s, 0, fm}}, 0, []string{"duplicate_first_mint"}},
		{"two concurrent first_mints",
			[]answer{{0, 0, fm}}, []answer{{50 * time.Millisecond, 0, fm}}, 0, []string{"duplicate_first_mint"}},
		{"a remint after a removal in the other store",
			[]answer{{0, 0, fm}, {10 * s, 0, rv}}, []answer{{20 * s, 0, rm}}, 0, []string{"remint_while_absent"}},
		{"already_absent after a mint in the other store: the orphan",
			[]answer{{0, 0, fm}}, []answer{{10 * s, 0, aa}}, 0, []string{"absent_while_present"}},
		{"two removals, no mint between",
			[]answer{{0, 0, fm}, {10 * s, 0, rv}}, []answer{{20 * s, 0, rv}}, 0, []string{"duplicate_removal"}},
		{"a mint racing a deregister, answered first_mint and removed, either order",
			[]answer{{-10 * s, 0, aa}, {0, 300 * time.Millisecond, fm}}, []answer{{100 * time.Millisecond, 100 * time.Millisecond, rv}}, 0, nil},
		{"a deregister racing another, answered removed and already_absent, then a first mint fits",
			[]answer{{-10 * s, 0, fm}, {0, 300 * time.Millisecond, rv}}, []answer{{100 * time.Millisecond, 100 * time.Millisecond, aa}, {20 * s, 0, fm}}, 0, nil},
		{"an already_absent concurrent with a second first_mint fits no order either",
			[]answer{{0, 0, fm}, {10*s + 50*time.Millisecond, 0, aa}}, []answer{{10 * s, 0, fm}}, 0, []string{"duplicate_first_mint", "absent_while_present"}},
		{"a remint racing a deregister: the remint took effect first",
			[]answer{{0, 0, fm}, {10 * s, 100 * time.Millisecond, rv}}, []answer{{10*s + 50*time.Millisecond, 100 * time.Millisecond, rm}}, 0, nil},
		{"inside the clock skew: taken as concurrent",
			[]answer{{0, 0, fm}, {10 * s, 0, rv}}, []answer{{11 * s, 0, rm}}, 0, nil},
		{"past a smaller clock skew: ordered",
			[]answer{{0, 0, fm}, {10 * s, 0, rv}}, []answer{{11 * s, 0, rm}}, 100 * time.Millisecond, []string{"remint_while_absent"}},
		{"a refusal between two answers changes nothing",
			[]answer{{0, 0, fm}, {20 * s, 0, rm}}, []answer{{10 * s, 0, vocab.ClassRefused}}, 0, nil},
		{"an intent without an outcome, no answer after it",
			[]answer{{0, 0, fm}, {10 * s, 0, 0}}, nil, 0, []string{"unsettled_intent"}},
		{"an intent inside the settle grace is still in flight, not unsettled",
			[]answer{{0, 0, fm}, {10*time.Minute - 30*s, 0, 0}}, nil, 0, nil},
		{"an intent without an outcome settled by the other daemon",
			[]answer{{0, 0, 0}}, []answer{{10 * s, 0, fm}}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := storeOf(t, tc.a...), storeOf(t, tc.b...)
			m := scanStores(t, tc.skew, a, b)
			if got := findingKinds(m); !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v; %+v", got, tc.want, m.Cross.Findings)
			}
			if got, want := m.Anomalies(), len(tc.want) > 0 || m.Stores[0].Anomalies() || m.Stores[1].Anomalies(); got != want {
				t.Errorf("Anomalies() = %v, want %v", got, want)
			}
			for k, n := range m.Cross.ByKind {
				if want := uint64(slices.Index(tc.want, string(k)) + 1); min(want, 1) != n {
					t.Errorf("ByKind[%s] = %d, want %d", k, n, min(want, 1))
				}
			}
		})
	}
}

// TestScanStoresNamesBothAnswersOfAFinding: a finding locates the answer
// it contradicts and the contradicting one, store, file and line, with
// the registration's id.
func TestScanStoresNamesBothAnswersOfAFinding(t *testing.T) {
	a := storeOf(t, answer{0, 0, fm})
	b := storeOf(t, answer{10 * time.Second, 0, aa})
	m := scanStores(t, 0, a, b)
	if len(m.Cross.Findings) != 1 {
		t.Fatalf("findings %+v, want one", m.Cross.Findings)
	}
	f := m.Cross.Findings[0]
	if f.Registration != "h1-review-007" || f.Earlier.Store != 0 || f.Earlier.Line != 2 || f.Earlier.Class != fm ||
		f.Later.Store != 1 || f.Later.Line != 2 || f.Later.Class != aa || f.Later.File != audit.ActiveFileName || f.Detail == "" {
		t.Errorf("finding %+v", f)
	}
	if m.Cross.Registrations != 1 || m.Cross.Answers != 2 || m.Cross.ClockSkew != audit.DefaultClockSkew {
		t.Errorf("cross report %+v", m.Cross)
	}
	if len(m.Stores) != 2 || m.Stores[0].Anomalies() || m.Stores[1].Anomalies() {
		t.Errorf("each store alone should be clean: %+v", m.Stores)
	}
}

func TestScanStoresCountsAnIntentSettledElsewhere(t *testing.T) {
	m := scanStores(t, 0, storeOf(t, answer{0, 0, 0}), storeOf(t, answer{10 * time.Second, 0, fm}))
	if m.Cross.SettledElsewhere != 1 || m.Cross.Total() != 0 {
		t.Errorf("settled %d, findings %d; want 1 and 0", m.Cross.SettledElsewhere, m.Cross.Total())
	}
	if m.Stores[0].IntentWithoutOutcome != 1 {
		t.Errorf("store 0 alone: %d intents without outcome, want 1 (its own anomaly stays)", m.Stores[0].IntentWithoutOutcome)
	}
}

func TestScanStoresRefusesADirectoryGivenTwiceAndNone(t *testing.T) {
	a := storeOf(t, answer{0, 0, fm})
	if _, err := audit.ScanStores(context.Background(), audit.ScanOptions{Now: now}, []string{a, a}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("the same store twice: %v, want an error saying so", err)
	}
	if _, err := audit.ScanStores(context.Background(), audit.ScanOptions{Now: now}, nil); err == nil {
		t.Error("no store: no error")
	}
}

// TestScanStoresKeepsRegistrationsApart: answers of two registrations
// (h1-review-007 and h1-review-008) are compared each with its own; two
// first mints of two registrations are no finding.
func TestScanStoresKeepsRegistrationsApart(t *testing.T) {
	other := func(id string, class vocab.OutcomeClass, at time.Time) string {
		in := intent(id)
		in.Requested.Instance = 8
		o := outcome(id, audit.Outcome{Class: class})
		o.Requested.Instance, o.RegistrationID = 8, "h1-review-008"
		return line(t, in, at) + line(t, o, at.Add(100*time.Millisecond))
	}
	a := storeOf(t, answer{0, 0, fm})
	b := writeStore(t, other("Y1", fm, t0.Add(10*time.Second)))
	m := scanStores(t, 0, a, b)
	if m.Cross.Total() != 0 || m.Cross.Registrations != 2 {
		t.Errorf("two registrations' first mints: %d findings over %d registrations, want 0 over 2: %+v", m.Cross.Total(), m.Cross.Registrations, m.Cross.Findings)
	}
}

// TestScanStoresKeepsOneStoresOrderWithinAMillisecond: two answers of one
// store stamped the same millisecond keep their file order (first_mint,
// then remint), which fits.
func TestScanStoresKeepsOneStoresOrderWithinAMillisecond(t *testing.T) {
	a := writeStore(t, line(t, intent("S1"), t0)+line(t, outcome("S1", audit.Outcome{Class: fm}), t0)+
		line(t, intent("S2"), t0)+line(t, outcome("S2", audit.Outcome{Class: rm}), t0))
	m := scanStores(t, 0, a, storeOf(t))
	if m.Cross.Total() != 0 {
		t.Errorf("first_mint then remint in one millisecond: %+v, want no finding", m.Cross.Findings)
	}
}

// TestScanStoresBoundsTheAnswersItCompares: past the bound, answers are
// counted as unchecked, not compared.
func TestScanStoresBoundsTheAnswersItCompares(t *testing.T) {
	audit.SetMaxCrossAnswers(t, 3)
	a := storeOf(t, answer{0, 0, fm}, answer{10 * time.Second, 0, rv})
	b := storeOf(t, answer{20 * time.Second, 0, fm}, answer{30 * time.Second, 0, fm}, answer{40 * time.Second, 0, 0})
	m := scanStores(t, 0, a, b)
	if m.Cross.Answers != 3 || m.Cross.Unchecked != 2 || m.Cross.Total() != 0 {
		t.Errorf("bound 3: %d answers compared, %d unchecked, %d findings; want 3, 2 and 0 (the duplicate first mint is past the bound)", m.Cross.Answers, m.Cross.Unchecked, m.Cross.Total())
	}
}

// TestScanStoresListsTheFirstFindingsAndCountsThemAll: the list stops at
// MaxReportedLines; the counts do not.
func TestScanStoresListsTheFirstFindingsAndCountsThemAll(t *testing.T) {
	var a, b strings.Builder
	n := audit.MaxReportedLines + 1
	for i := range n {
		for _, w := range []struct {
			sb *strings.Builder
			at time.Duration
		}{{&a, 0}, {&b, 10 * time.Second}} {
			id := fmt.Sprintf("L%d-%d", i, w.at)
			in := intent(id)
			in.Requested.Instance = uint32(i + 1)
			o := outcome(id, audit.Outcome{Class: fm})
			o.Requested.Instance, o.RegistrationID = uint32(i+1), fmt.Sprintf("h1-review-%03d", i+1)
			w.sb.WriteString(line(t, in, t0.Add(w.at)) + line(t, o, t0.Add(w.at+100*time.Millisecond)))
		}
	}
	m := scanStores(t, 0, writeStore(t, a.String()), writeStore(t, b.String()))
	if got := m.Cross.ByKind[audit.CrossDuplicateFirstMint]; got != uint64(n) || len(m.Cross.Findings) != audit.MaxReportedLines {
		t.Errorf("%d duplicate first mints: counted %d, listed %d; want %d and %d", n, got, len(m.Cross.Findings), n, audit.MaxReportedLines)
	}
}
