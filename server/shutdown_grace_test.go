package server

// Shutdown past its grace period, over pipes in a synctest bubble: a verb
// call still running when the grace ends has written its audit records (or
// will), so its answer must reach the caller; closing its connection would
// leave the caller with no answer, and wire.Client would send the call
// again, a second invocation on record for one call (the restart test of
// issue 20 saw 16 of them: 370 answers, 386 intent/outcome pairs).

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

const mintBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review","spec":{"component":"review","service_name":"review","reload":"r"},"wrap_ttl":300}`

func mintRequestBytes() string {
	return "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(mintBody)) + "\r\n\r\n" + mintBody
}

// blockedMint is a verb whose calls signal entered and wait for release;
// calls counts them, returned those that came back.
type blockedMint struct {
	entered, release chan struct{}
	once             sync.Once
	calls, returned  atomic.Int32
}

// unblock releases the calls (once); deferred, it lets a failed test's
// bubble end.
func (b *blockedMint) unblock() { b.once.Do(func() { close(b.release) }) }

func newBlockedMint() *blockedMint {
	return &blockedMint{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (b *blockedMint) verbs() stubVerbs {
	return stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		b.calls.Add(1)
		b.entered <- struct{}{}
		<-b.release
		b.returned.Add(1)
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
	}}
}

// mintAnswer sends a mint on c and reports its answer's status, or the
// error that kept it from coming (the connection closed without one).
func mintAnswer(c net.Conn) <-chan error {
	out := make(chan error, 1)
	go func() {
		if _, err := io.WriteString(c, mintRequestBytes()); err != nil {
			out <- err
			return
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			out <- err
			return
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err == nil && res.StatusCode != http.StatusOK {
			err = errors.New("HTTP " + strconv.Itoa(res.StatusCode))
		}
		out <- err
	}()
	return out
}

// The grace period ends while a verb call runs: connections without one are
// closed then (the grace still bounds them), the call's connection stays
// open, and once the call returns its answer is written before the
// connection closes; Shutdown returns only after that, with the grace's
// error.
func TestShutdownPastItsGraceAnswersTheVerbCallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlockedMint()
		defer b.unblock()
		// A long header timeout: only the grace's end may close the
		// connection still sending its headers.
		s, l, served := pipeServer(t, Options{Verbs: b.verbs(), ReadHeaderTimeout: time.Hour, ReadTimeout: time.Hour})
		c := l.dial()
		answer := mintAnswer(c)
		<-b.entered

		// A connection still sending its request's headers: no verb call.
		slow := l.dial()
		if _, err := io.WriteString(slow, "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\n"); err != nil {
			t.Fatal(err)
		}
		slowClosed := readUntilClosed(slow)
		synctest.Wait()

		shut, cancel := shutdownPastGrace(s)
		defer cancel()

		select {
		case took := <-slowClosed:
			if took > 2*time.Second {
				t.Errorf("the connection without a verb call closed after %v, want at the grace's end", took)
			}
		default:
			t.Error("the connection still sending its headers is open past the grace period")
		}
		select {
		case err := <-answer:
			t.Fatalf("the verb call in flight lost its connection at the grace's end (%v): its records are written and its answer never comes", err)
		default:
		}
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned (%v) while a verb call was still running", err)
		default:
		}

		b.unblock()
		if err := <-answer; err != nil {
			t.Fatalf("the verb call in flight at the grace's end got no answer: %v", err)
		}
		if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown returned %v, want the grace period's deadline", err)
		}
		if n, r := b.calls.Load(), b.returned.Load(); n != 1 || r != 1 {
			t.Fatalf("verb calls %d, returned %d: want 1 and 1", n, r)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
		c.Close()
	})
}

// A caller that never reads its answer cannot hold the stop: past the
// grace, an answer gets evictedFlushGrace to be written once its verb call
// returns (the 30 s write timeout is set far beyond here), then the
// connection is closed and Shutdown returns.
func TestShutdownPastItsGraceBoundsAnAnswerNobodyReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlockedMint()
		defer b.unblock()
		s, l, served := pipeServer(t, Options{Verbs: b.verbs(), WriteTimeout: time.Hour})
		c := l.dial()
		if _, err := io.WriteString(c, mintRequestBytes()); err != nil { // and never reads
			t.Fatal(err)
		}
		<-b.entered

		shut, cancel := shutdownPastGrace(s)
		defer cancel()

		b.unblock()
		start := time.Now()
		if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown returned %v, want the grace period's deadline", err)
		}
		if took := time.Since(start); took > 2*evictedFlushGrace {
			t.Fatalf("Shutdown took %v after the verb call returned to a caller that never reads, want at most %v", took, 2*evictedFlushGrace)
		}
		<-served
		c.Close()
	})
}

// shutdownPastGrace starts s.Shutdown with a grace period of a second and
// lets the bubble's fake time run past it; Shutdown's result arrives on
// the channel. Call within a synctest bubble, and cancel at its end.
func shutdownPastGrace(s *Server) (<-chan error, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	time.Sleep(2 * time.Second) // fake time: the grace period is over
	synctest.Wait()
	return shut, cancel
}
