package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// A request is whole within a deadline. On a connection under a budget the
// body of a request is read before its handler runs, within the body-read
// timeout of the end of its headers: a body sent one byte at a time would
// otherwise keep its connection busy, never evictable, for as long as the
// read timeout allowed, and two identities' worth of such connections
// filled a listener (issue 41). Until the body is whole the connection
// holds no request in flight, so a newcomer at a cap may evict it; past the
// deadline it is closed without an answer and counted (ReasonBodyTimeout).
// Once the body is whole the request is in flight, bounded by the write
// timeout; net/http lifts the read deadline as the body hits its end.

// SetReadBodyTimeout sets the body-read timeout of the requests whose
// headers end from now on (Options.ReadBodyTimeout; zero means its
// default), for a live reload. A negative d is refused. Safe for concurrent
// use.
func (s *Server) SetReadBodyTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("wire: SetReadBodyTimeout: %v is negative", d)
	}
	s.bodyTimeout.Store(int64(orDefault(d, DefaultReadBodyTimeout)))
	return nil
}

// ReadBodyTimeout returns the body-read timeout in force. Safe for
// concurrent use.
func (s *Server) ReadBodyTimeout() time.Duration { return time.Duration(s.bodyTimeout.Load()) }

// receive takes r, whose headers have just arrived on tc, to the point
// where its handler may run: a request without a body at once, one with a
// body once the body is whole. It returns false when the request must not
// run: tc was evicted meanwhile, or its body did not arrive within the
// body-read timeout (counted); the connection is then closed without an
// answer. Once it has returned, release must be called.
func (s *Server) receive(tc *trackedConn, r *http.Request) bool {
	hasBody := r.Body != nil && r.Body != http.NoBody
	if !tc.set.begin(tc, hasBody) {
		return false
	}
	if !hasBody {
		return true
	}
	_ = tc.Conn.SetReadDeadline(time.Now().Add(s.ReadBodyTimeout()))
	tc.body = wholeBody{buf: getBuf(), orig: r.Body}
	// At most one byte past the bound: every handler refuses a body that
	// long (wire.MaxBodyBytes is the protocol's), and reads no further.
	tc.limit = io.LimitedReader{R: r.Body, N: wire.MaxBodyBytes + 1}
	_, err := tc.body.buf.ReadFrom(&tc.limit)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		tc.set.bodyTimedOut(tc)
		return false
	case err != nil:
		// The caller hung up, or the budget closed the connection: the
		// handler (if whole lets it run) answers what it reads.
		tc.body.err = err
	default:
		// Whole (or over the bound). net/http lifted the deadline as the
		// body hit its end (its background read starts with none), so the
		// request's context is not cancelled at the body deadline while
		// the verb runs.
		tc.body.err = io.EOF
	}
	r.Body = &tc.body
	return tc.set.whole(tc)
}

// release returns the buffer of tc's last request body to the pool.
func (tc *trackedConn) release() {
	if tc.body.buf != nil {
		putBuf(tc.body.buf)
	}
	tc.body = wholeBody{}
}

// wholeBody is a request's body as its handler reads it: the bytes read
// before the handler ran (of a body longer than wire.MaxBodyBytes, one
// byte more than that), then what followed them: the end (io.EOF) or the
// read's error.
type wholeBody struct {
	buf  *bytes.Buffer
	orig io.ReadCloser // net/http's body, closed by Close
	err  error         // what follows buf's bytes
}

func (b *wholeBody) Read(p []byte) (int, error) {
	if b.buf.Len() > 0 {
		return b.buf.Read(p)
	}
	return 0, b.err
}

func (b *wholeBody) Close() error { return b.orig.Close() }
