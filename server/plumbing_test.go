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

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// pipeListener hands out the server ends of net.Pipe connections; its
// buffered queue plays the kernel's backlog.
type pipeListener struct {
	queue    chan net.Conn
	done     chan struct{}
	once     sync.Once
	accepted atomic.Int32
}

func newPipeListener() *pipeListener {
	return &pipeListener{queue: make(chan net.Conn, 8), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.queue:
		l.accepted.Add(1)
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// dial queues a connection and returns the client end.
func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.queue <- s
	return c
}

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
		{"body never finished", "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"protocol", wire.DefaultReadTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, l, served := pipeServer(t, Options{})
				c := l.dial()
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
		c := l.dial()
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
		c := l.dial()
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
		late := l.dial()
		synctest.Wait()
		if n := l.accepted.Load(); n != 1 {
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

func TestBudgetsAndTimeoutsHaveTheirDefaults(t *testing.T) {
	h, err := health.NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Verbs: stubVerbs{}, Health: h})
	if err != nil {
		t.Fatal(err)
	}
	o := s.opts
	if o.UnixMaxConns != DefaultUnixMaxConns || o.TLSMaxConns != DefaultTLSMaxConns || o.TLSHandshakeMaxConns != DefaultTLSHandshakeMaxConns ||
		o.TLSHandshakeTimeout != DefaultTLSHandshakeTimeout || o.MaxConnsPerIdentity != DefaultMaxConnsPerIdentity ||
		o.RejectionLogInterval != DefaultRejectionLogInterval {
		t.Errorf("budgets got %+v, want the defaults", o)
	}
	if s.srv.ReadHeaderTimeout != wire.DefaultReadHeaderTimeout || s.srv.ReadTimeout != wire.DefaultReadTimeout ||
		s.srv.WriteTimeout != wire.DefaultWriteTimeout || s.srv.IdleTimeout != wire.DefaultIdleTimeout || s.srv.MaxHeaderBytes != wire.MaxHeaderBytes {
		t.Errorf("timeouts got %v/%v/%v/%v, header bound %d; want the defaults",
			s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout, s.srv.MaxHeaderBytes)
	}
}

func TestThrottleWithoutARetryAfterAdvertisesOneSecond(t *testing.T) {
	status, body, retryAfter, err := wire.RefusalFor(&registrar.ThrottledError{RequestID: "r.1"})
	if err != nil || status != 429 || retryAfter != 1 || body.Error.RetryAfter != 1 {
		t.Fatalf("got %d %+v retry-after %d, %v; want 429 with 1 s in both", status, body, retryAfter, err)
	}
}

func TestUnmappableVerbAnswersAreInternal(t *testing.T) {
	for _, err := range []error{
		errors.New("plain"),
		&registrar.RefusedError{RequestID: "r.1", Reason: 200},
		&registrar.UnavailableError{RequestID: "r.1", Reason: 200},
	} {
		if _, _, _, ierr := wire.RefusalFor(err); !errors.Is(ierr, wire.ErrUnmappable) {
			t.Errorf("%v: got %v, want wire.ErrUnmappable", err, ierr)
		}
	}
}
