package server

// Tests of the body deadline (whole.go) over in-memory pipes inside a
// synctest bubble: the deadline is checked as when each connection closes
// on the bubble's fake clock, so nothing sleeps for real.

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// mintHead is mintRequest's header block; mintBodyForPipes follows it.
var mintHead = strings.TrimSuffix(mintRequest, mintBodyForPipes)

// countedMints is a verbs stub that counts its mints and answers each at
// once.
func countedMints(n *atomic.Int32) stubVerbs {
	return stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		n.Add(1)
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
	}}
}

// closing is what a connection received until the server closed it, and
// when that was on the bubble's clock.
type closing struct {
	took     time.Duration
	received int64
}

// closeOf reads c until the server closes it.
func closeOf(c net.Conn) <-chan closing {
	done := make(chan closing, 1)
	start := time.Now()
	go func() {
		n, _ := io.Copy(io.Discard, c)
		done <- closing{took: time.Since(start), received: n}
	}()
	return done
}

// bodyTimeoutServer serves o on a listener of kind and returns a
// connection to it of identity "slow" (a client certificate over TLS).
func bodyTimeoutServer(t *testing.T, kind ListenerKind, o Options) (*Server, net.Conn, chan error) {
	t.Helper()
	if kind == ListenerTLS {
		p := newPipePKI(t)
		s, l, served := tlsPipeServer(t, o, p)
		cert := p.Client(t, "spiffe://registrar.test/slow")
		c, err := tlsDial(l, p, &cert)
		if err != nil {
			t.Fatal(err)
		}
		return s, c, served
	}
	s, l, served := pipeServer(t, o)
	return s, l.Dial(), served
}

// A body sent a byte at a time, never whole: its connection is closed at
// the body deadline, counted from the end of its headers (the bytes that
// keep arriving do not extend it), without an answer and without a verb
// call, and counted as body_timeout, not header_timeout; on the socket and
// over TLS, where the deadline lies below the TLS layer.
func TestABodyNotWholeWithinItsTimeoutIsClosedUnansweredAndCounted(t *testing.T) {
	for _, kind := range []ListenerKind{ListenerUnix, ListenerTLS} {
		t.Run(kind.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mints atomic.Int32
				s, c, served := bodyTimeoutServer(t, kind, Options{ReadBodyTimeout: 2 * time.Second, Verbs: countedMints(&mints)})
				closed := closeOf(c)
				if _, err := io.WriteString(c, mintHead+mintBodyForPipes[:10]); err != nil {
					t.Fatal(err)
				}
				var drip sync.WaitGroup
				defer drip.Wait()
				drip.Go(func() {
					for i := 10; i < len(mintBodyForPipes)-1; i++ {
						time.Sleep(500 * time.Millisecond)
						if _, err := c.Write([]byte{mintBodyForPipes[i]}); err != nil {
							return // closed
						}
					}
				})
				got := <-closed
				if got.took < 2*time.Second || got.took > 2*time.Second+100*time.Millisecond {
					t.Errorf("the connection of a body never whole closed after %v, want at the body timeout, 2s", got.took)
				}
				if got.received != 0 {
					t.Errorf("the connection got %d bytes of an answer, want it closed without one", got.received)
				}
				synctest.Wait()
				wantRejected(t, s, kind, ReasonBodyTimeout, 1, "")
				wantRejected(t, s, kind, ReasonHeaderTimeout, 0, ": the headers were whole")
				if n := mints.Load(); n != 0 {
					t.Errorf("the verb ran %d times for a body never whole", n)
				}
				c.Close()
				shutdown(t, s, served)
			})
		})
	}
}

// The body deadline runs from the end of the headers: headers that take
// most of their own timeout, then a body that takes most of its own, make
// a request answered, though the two together exceed either timeout.
func TestTheBodyTimeoutRunsFromTheEndOfTheHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int32
		s, l, served := pipeServer(t, Options{ReadHeaderTimeout: 3 * time.Second, ReadBodyTimeout: 3 * time.Second, Verbs: countedMints(&mints)})
		c := l.Dial()
		half := len(mintBodyForPipes) / 2
		for _, step := range []string{mintHead[:20], mintHead[20:], mintBodyForPipes[:half], mintBodyForPipes[half:]} {
			if _, err := io.WriteString(c, step); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1400 * time.Millisecond)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a request whose headers and body each came within their timeout got no answer: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || mints.Load() != 1 {
			t.Errorf("status %d after %d mints, want 200 after 1", res.StatusCode, mints.Load())
		}
		wantRejected(t, s, ListenerUnix, ReasonBodyTimeout, 0, "")
		c.Close()
		shutdown(t, s, served)
	})
}

// Once its body is whole a request is in flight: a verb call that outlasts
// the body timeout many times over is neither cut nor cancelled, and is
// answered.
func TestAWholeRequestOutlivesTheBodyTimeoutInItsVerb(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Bool
		slowVerb := stubVerbs{mint: func(ctx context.Context, _ registrar.MintRequest) (registrar.MintResult, error) {
			time.Sleep(20 * time.Second)
			cancelled.Store(ctx.Err() != nil)
			return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
		}}
		s, l, served := pipeServer(t, Options{ReadBodyTimeout: time.Second, Verbs: slowVerb})
		c := l.Dial()
		if st := <-startMint(t, c); st != 200 {
			t.Fatalf("a whole request whose verb took 20 s got %d, want 200", st)
		}
		if cancelled.Load() {
			t.Error("the verb's context was cancelled at the body deadline of a whole request")
		}
		wantRejected(t, s, ListenerUnix, ReasonBodyTimeout, 0, "")
		c.Close()
		shutdown(t, s, served)
	})
}

// SetReadBodyTimeout applies to the requests whose headers end after it
// (the live reload of registrar.read_body_timeout_ms): zero is the default
// again, a negative value is refused and changes nothing.
func TestTheBodyTimeoutChangesWhileServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int32
		s, l, served := pipeServer(t, Options{Verbs: countedMints(&mints)})
		if got := s.ReadBodyTimeout(); got != DefaultReadBodyTimeout {
			t.Fatalf("ReadBodyTimeout got %v before any change, want the default %v", got, DefaultReadBodyTimeout)
		}
		stalled := func(want time.Duration) {
			t.Helper()
			c := l.Dial()
			closed := closeOf(c)
			if _, err := io.WriteString(c, mintHead+mintBodyForPipes[:10]); err != nil {
				t.Fatal(err)
			}
			if got := (<-closed).took; got < want || got > want+100*time.Millisecond {
				t.Errorf("a stalled body closed after %v, want %v", got, want)
			}
			c.Close()
		}
		if err := s.SetReadBodyTimeout(time.Second); err != nil {
			t.Fatal(err)
		}
		stalled(time.Second)
		if err := s.SetReadBodyTimeout(-time.Second); err == nil {
			t.Error("SetReadBodyTimeout took a negative timeout")
		}
		if got := s.ReadBodyTimeout(); got != time.Second {
			t.Errorf("ReadBodyTimeout got %v after a refused change, want still 1s", got)
		}
		stalled(time.Second)
		if err := s.SetReadBodyTimeout(0); err != nil {
			t.Fatal(err)
		}
		stalled(DefaultReadBodyTimeout)
		synctest.Wait()
		wantRejected(t, s, ListenerUnix, ReasonBodyTimeout, 3, "")
		if n := mints.Load(); n != 0 {
			t.Errorf("the verb ran %d times", n)
		}
		shutdown(t, s, served)
	})
}

func TestANegativeBodyTimeoutIsRefusedByNew(t *testing.T) {
	_, err := New(Options{Verbs: stubVerbs{}, Health: newTestHolder(t), ReadBodyTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ReadBodyTimeout") {
		t.Fatalf("New with a negative ReadBodyTimeout: %v, want an error naming it", err)
	}
}
