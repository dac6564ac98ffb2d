package server

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
)

// TestEachListenerAndReasonIsThrottledApart: the WARN lines are throttled
// per (listener, reason), and each line spells listener, reason and
// suppressed first, then the caller's attributes.
func TestEachListenerAndReasonIsThrottledApart(t *testing.T) {
	rec := &logRecorder{}
	s := &Server{logger: slog.New(rec), rejectLog: logthrottle.New(slog.New(rec), time.Hour, nil)}
	s.reject(ListenerUnix, ReasonMalformed, slog.String("detail", "x"))
	s.reject(ListenerUnix, ReasonMalformed)
	s.reject(ListenerUnix, ReasonNoIdentity)
	s.reject(ListenerTLS, ReasonMalformed)
	s.reject(ListenerTLS, ReasonMalformed)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var got [][]string
	for _, r := range rec.records {
		var keys []string
		r.Attrs(func(a slog.Attr) bool { keys = append(keys, a.Key+"="+a.Value.String()); return true })
		got = append(got, append([]string{r.Level.String(), r.Message}, keys...))
	}
	want := [][]string{
		{"WARN", "wire: rejected", "listener=unix", "reason=malformed", "suppressed=0", "detail=x"},
		{"WARN", "wire: rejected", "listener=unix", "reason=no_identity", "suppressed=0"},
		{"WARN", "wire: rejected", "listener=tls", "reason=malformed", "suppressed=0"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("lines\n got %q\nwant %q", got, want)
	}
	if n := s.stats.rejected[ListenerTLS][ReasonMalformed].Load(); n != 2 {
		t.Errorf("tls malformed counted %d, want 2: every rejection is counted, logged or not", n)
	}
}

// A listener kind or reason outside the closed sets spells its number,
// never another's label.
func TestKindsAndReasonsOutsideTheSetsSpellTheirNumber(t *testing.T) {
	if got := NumListenerKinds.String(); got != "listener(2)" {
		t.Errorf("NumListenerKinds.String() = %q, want listener(2)", got)
	}
	if got := (NumReasons + 3).String(); got != "reason(14)" {
		t.Errorf("(NumReasons + 3).String() = %q, want reason(14)", got)
	}
}
