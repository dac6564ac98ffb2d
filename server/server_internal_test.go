package server

// Tests of the server's plumbing (connection cap, timeouts, graceful
// shutdown) over in-memory pipes inside a synctest bubble: time is fake
// and "nothing more can happen" is decidable, so nothing sleeps for real.

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

	"github.com/registrar-otel/registrar-otel/internal/testing/pipetest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// pipeListener hands out the server ends of net.Pipe connections; its
// buffered queue plays the kernel's backlog.
type pipeListener = pipetest.Listener

func newPipeListener() *pipeListener { return pipetest.NewListener(8) }

type stubVerbs struct {
	mint func(context.Context, registrar.MintRequest) (registrar.MintResult, error)
}

func (v stubVerbs) Mint(ctx context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
	return v.mint(ctx, req)
}

func (stubVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return registrar.DeregisterResult{}, errors.New("unused")
}

// pipeServer serves a pipe listener; every connection is identified as
// "test" (pipes have no peer credentials).
func pipeServer(t *testing.T, o Options) (*Server, *pipeListener, chan error) {
	t.Helper()
	return servePipes(t, o, func(net.Conn) connIdentity { return connIdentity{id: "test"} }, nil)
}

const healthRequest = "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n"

// roundTrip writes req on c and reads one response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, req string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func shutdown(t *testing.T, s *Server, served chan error) {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
}

// readUntilClosed reads c until the server closes it and returns how long
// that took on the bubble's clock.
func readUntilClosed(c net.Conn) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		io.Copy(io.Discard, c)
		done <- time.Since(start)
	}()
	return done
}

func TestTimeoutsCloseStalledConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		// send is what the client writes before stalling.
		send string
		want time.Duration
	}{
		{"headers never finished", "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n", wire.DefaultReadHeaderTimeout},
		{"body never finished", "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"protocol", DefaultReadBodyTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, l, served := pipeServer(t, Options{})
				c := l.Dial()
				closed := readUntilClosed(c)
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				took := <-closed
				if took < tc.want || took > tc.want+time.Second {
					t.Fatalf("stalled connection closed after %v, want %v", took, tc.want)
				}
				c.Close()
				shutdown(t, s, served)
			})
		})
	}
}

func TestIdleKeepAliveConnectionIsClosedAfterIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, served := pipeServer(t, Options{IdleTimeout: 7 * time.Second})
		c := l.Dial()
		br := bufio.NewReader(c)
		if res := roundTrip(t, c, br, healthRequest); res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		start := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the server sent bytes on an idle connection")
		}
		if took := time.Since(start); took < 7*time.Second || took > 8*time.Second {
			t.Fatalf("idle connection closed after %v, want 7s", took)
		}
		c.Close()
		shutdown(t, s, served)
	})
}

func TestShutdownLetsAnInFlightInvocationFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		s, l, served := pipeServer(t, Options{Verbs: stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
			close(entered)
			<-release
			return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
		}}})
		c := l.Dial()
		body := `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review","spec":{"component":"review","service_name":"review","reload":"r"},"wrap_ttl":300}`
		status := make(chan int, 1)
		go func() {
			res := roundTrip(t, c, bufio.NewReader(c), "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			status <- res.StatusCode
		}()
		<-entered

		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned (%v) with an invocation in flight", err)
		default:
		}
		// New connections are no longer accepted.
		late := l.Dial()
		synctest.Wait()
		if n := l.Accepted(); n != 1 {
			t.Fatalf("accepted %d connections after Shutdown began, want 1", n)
		}

		close(release)
		if st := <-status; st != 200 {
			t.Fatalf("in-flight mint answered %d, want 200", st)
		}
		if err := <-shut; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
		c.Close()
		late.Close()
	})
}

// Shutdown past its grace period, over pipes in a synctest bubble: a verb
// call still running when the grace ends has written its audit records (or
// will), so its answer must reach the caller; closing its connection would
// leave the caller with no answer, and wire.Client would send the call
// again, a second invocation on record for one call (the restart test of
// issue 20 saw 16 of them: 370 answers, 386 intent/outcome pairs).

// The pipelined mint of these tests is budget_test.go's mintRequest.

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
		if _, err := io.WriteString(c, mintRequest); err != nil {
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
		c := l.Dial()
		answer := mintAnswer(c)
		<-b.entered

		// A connection still sending its request's headers: no verb call.
		slow := l.Dial()
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
		c := l.Dial()
		if _, err := io.WriteString(c, mintRequest); err != nil { // and never reads
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
