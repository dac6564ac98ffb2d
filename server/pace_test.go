package server

// Tests of the refusal pace (refusal.go's pace) over in-memory pipes
// inside a synctest bubble: which answers are held, for how long on the
// bubble's clock, with their seat kept, and what ends a hold early. The
// pipes' connections are all one identity; another identity calling is a
// seat of the gate taken by the test itself.

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

const testPace = 40 * time.Millisecond

// answering is verbs whose every mint returns err (a first mint when nil).
func answering(err error) stubVerbs {
	return stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		if err != nil {
			return registrar.MintResult{}, err
		}
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
	}}
}

// otherIdentityCalls seats a request of another identity in s's gate and
// returns what gives its seat back; the identity then lingers
// contendedLinger, still calling.
func otherIdentityCalls(s *Server) (leave func()) {
	f, w := s.gate.arrive(nil, "another", ListenerTLS)
	if w != nil {
		panic("the other identity's request had to wait")
	}
	return func() { s.gate.leave(f, ListenerTLS) }
}

// timedMint mints once on a fresh connection of l and returns how long
// the answer took on the bubble's clock.
func timedMint(t *testing.T, l *pipeListener) time.Duration {
	t.Helper()
	c := l.Dial()
	defer c.Close()
	start := time.Now()
	roundTrip(t, c, bufio.NewReader(c), mintRequest)
	return time.Since(start)
}

var (
	throttled   = &registrar.ThrottledError{RequestID: "r.2", RetryAfterSeconds: 2}
	limitedRef  = &registrar.RefusedError{RequestID: "r.3", Reason: vocab.ReasonComponentNotConfigured, Limited: true}
	recordedRef = &registrar.RefusedError{RequestID: "r.4", Reason: vocab.ReasonComponentNotConfigured}
)

// The limiter's answers (throttled, a refusal past its bucket) are held
// for the pace while another identity calls, each counted once; they keep
// their status and their seat meanwhile.
func TestTheLimitersAnswersArePacedWhileAnotherIdentityCalls(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		status int
	}{
		"throttled":       {throttled, http.StatusTooManyRequests},
		"limited refusal": {limitedRef, http.StatusUnprocessableEntity},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, l, served := pipeServer(t, Options{Verbs: answering(tc.err), RefusalPace: testPace})
				leave := otherIdentityCalls(s)
				c := l.Dial()
				start := time.Now()
				done := writeDone(c, mintRequest)
				answered := make(chan *http.Response, 1)
				go func() {
					res, _ := http.ReadResponse(bufio.NewReader(c), nil)
					if res != nil {
						io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
					answered <- res
				}()
				<-done
				synctest.Wait() // the answer is held: its seat too
				if got := s.Stats().InFlight[ListenerUnix]; got != 1 {
					t.Errorf("in flight during the hold got %d, want 1: the held answer keeps its seat", got)
				}
				res := <-answered
				if res == nil || res.StatusCode != tc.status {
					t.Fatalf("answer %+v, want status %d", res, tc.status)
				}
				if took := time.Since(start); took != testPace {
					t.Errorf("answered after %v, want the pace, %v", took, testPace)
				}
				if got := s.Stats().RefusalsPaced; got != [NumListenerKinds]uint64{ListenerUnix: 1} {
					t.Errorf("refusals paced got %v, want one on unix", got)
				}
				synctest.Wait()
				if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
					t.Errorf("in flight after the answer got %d, want 0", got)
				}
				c.Close()
				leave()
				shutdown(t, s, served)
			})
		})
	}
}

// Everything else is answered at once: the same refusals from an identity
// calling alone (the other's linger over), answers that are not the
// limiter's, and any answer with the pace off.
func TestOtherAnswersAreNotPaced(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		pace    time.Duration
		another bool
	}{
		"throttled, alone":              {throttled, testPace, false},
		"limited refusal, alone":        {limitedRef, testPace, false},
		"a refusal that writes records": {recordedRef, testPace, true},
		"admitted":                      {nil, testPace, true},
		"throttled, the pace off":       {throttled, 0, true},
		"an unavailable registrar":      {&registrar.UnavailableError{RequestID: "r.5"}, testPace, true},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, l, served := pipeServer(t, Options{Verbs: answering(tc.err), RefusalPace: tc.pace})
				if tc.another {
					defer otherIdentityCalls(s)()
				} else {
					otherIdentityCalls(s)()
					time.Sleep(contendedLinger) // fake time: the other identity stops calling
				}
				if took := timedMint(t, l); took != 0 {
					t.Errorf("answered after %v, want at once", took)
				}
				if got := s.Stats().RefusalsPaced; got != [NumListenerKinds]uint64{} {
					t.Errorf("refusals paced got %v, want none", got)
				}
				shutdown(t, s, served)
			})
		})
	}
}

// A connection closed during the hold ends it: the seat is given back and
// the handler returns at once, not at the end of the pace.
func TestAHeldRefusalsConnectionClosedGivesItsSeatBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, served := pipeServer(t, Options{Verbs: answering(throttled), RefusalPace: MaxRefusalPace})
		defer otherIdentityCalls(s)()
		c := l.Dial()
		start := time.Now()
		<-writeDone(c, mintRequest)
		synctest.Wait()
		if got := s.Stats().RefusalsPaced[ListenerUnix]; got != 1 {
			t.Fatalf("refusals paced got %d, want the one held", got)
		}
		c.Close()
		synctest.Wait()
		if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
			t.Errorf("in flight after the close got %d, want 0", got)
		}
		// The handler has returned: a shutdown, which waits for every
		// handler, ends well before the pace would have.
		shutdown(t, s, served)
		if took := time.Since(start); took >= MaxRefusalPace/2 {
			t.Errorf("the held handler returned after %v, want at the close, well before the pace (%v) ends", took, MaxRefusalPace)
		}
	})
}

// SetFairness changes the pace from the next refusal.
func TestThePaceChangesLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, served := pipeServer(t, Options{Verbs: answering(limitedRef)})
		defer otherIdentityCalls(s)()
		if took := timedMint(t, l); took != 0 {
			t.Errorf("answered after %v with no pace, want at once", took)
		}
		f := s.Fairness()
		f.RefusalPace = testPace
		if err := s.SetFairness(f); err != nil {
			t.Fatal(err)
		}
		if took := timedMint(t, l); took != testPace {
			t.Errorf("answered after %v, want the new pace, %v", took, testPace)
		}
		shutdown(t, s, served)
	})
}
