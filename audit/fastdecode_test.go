package audit

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// decodeBenchLines returns lines as the store writes them under a
// flood-shaped load (the mix of scanBenchStore): an intent and its outcome
// per request, and a counted record every 50 requests.
func decodeBenchLines(tb testing.TB) [][]byte {
	tb.Helper()
	ts := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	var lines [][]byte
	add := func(r *Record) {
		b, err := Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		lines = append(lines, b)
	}
	for i := range 500 {
		id := fmt.Sprintf("Zm9vYmFyYmF6.%d", 3*i+1)
		caller := fmt.Sprintf("unix-peer:uid=%d", 1000+i%64)
		req := &Requested{ServiceName: "review", Host: fmt.Sprintf("host-%d", i%97), Instance: uint32(1 + i%999)}
		add(&Record{Phase: PhaseIntent, TS: ts, RequestID: id, Verb: vocab.Mint, CallerIdentity: caller, Requested: req})
		add(&Record{Phase: PhaseOutcome, TS: ts.Add(3 * time.Millisecond), RequestID: id, Verb: vocab.Mint, CallerIdentity: caller,
			Requested: req, RegistrationID: fmt.Sprintf("%s-review-%03d", req.Host, req.Instance), Outcome: &Outcome{Class: vocab.ClassIdempotentRemint}})
		if i%50 == 0 {
			add(&Record{Phase: PhaseLimited, TS: ts, Verb: vocab.Mint, CallerIdentity: caller, LimitedBucket: vocab.Admission,
				Count: 1234, WindowStart: ts.Add(-time.Minute), WindowEnd: ts})
		}
		ts = ts.Add(40 * time.Millisecond)
	}
	return lines
}

// jsonRecord is the record as encoding/json's reflection decoder reads it
// into tagged fields: the library way, with none of the reader's rules
// (key order, presence, canonical spelling), so a floor for the standard
// path rather than a replacement for it.
type jsonRecord struct {
	RecordVersion  int    `json:"record_version"`
	Phase          string `json:"phase"`
	TS             string `json:"ts"`
	RequestID      string `json:"request_id"`
	Verb           string `json:"verb"`
	CallerIdentity string `json:"caller_identity"`
	Requested      *struct {
		ServiceName string `json:"service_name"`
		Host        string `json:"host"`
		Instance    uint32 `json:"instance"`
	} `json:"requested"`
	RegistrationID string `json:"registration_id"`
	Outcome        *struct {
		Class  string `json:"class"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"outcome"`
	LimitedBucket string `json:"limited_bucket"`
	Count         uint64 `json:"count"`
	WindowStart   string `json:"window_start"`
	WindowEnd     string `json:"window_end"`
}

// BenchmarkDecodeLine decodes the same store lines (all three phases, the
// flood mix) with the single-pass decoder as the scan uses it, with the
// token decoder (the standard path every line would take without it), and
// with json.Unmarshal into tagged fields (the library way, no rule
// checked). Run it with -count so the three interleave; read ratios.
func BenchmarkDecodeLine(b *testing.B) {
	lines := decodeBenchLines(b)
	var ld lineDecoder
	var jr jsonRecord
	for _, c := range []struct {
		name   string
		decode func([]byte) error
	}{
		{"single-pass", func(l []byte) error { _, err := ld.decode(l); return err }},
		{"tokens", func(l []byte) error { _, err := unmarshalTokens(l); return err }},
		{"json.Unmarshal", func(l []byte) error { jr = jsonRecord{}; return json.Unmarshal(l, &jr) }},
	} {
		b.Run("decoder="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := c.decode(lines[i%len(lines)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestDecodeBenchLinesTakeTheSinglePass: the benchmark measures the single
// pass only if every one of its lines is taken by it.
func TestDecodeBenchLinesTakeTheSinglePass(t *testing.T) {
	var ld lineDecoder
	for _, l := range decodeBenchLines(t) {
		if ld.canonical(l) == nil {
			t.Fatalf("the single pass does not take %s", l)
		}
	}
}
