// Package floodtest is the load client and the floor server of the flood
// benchmarks (BenchmarkFlood, daemon/daemon_test.go): what anyone needs to rerun the
// measurement of the daemon's headline figure, the cost of answering a
// flood, against the cheapest server that gives the same answers.
//
// The Client holds n keep-alive HTTP/1.1 connections to a unix socket and
// sends one prebuilt request on each, waiting for each answer before the
// next (no pipelining, like a real caller). It parses only what it must (the
// status line, Content-Length, the body length) into buffers it owns, so
// it allocates nothing per request and is never the bottleneck it measures.
//
// The Floor is a no-op net/http server: every request is read to its end
// and answered with fixed bytes and headers. Serving it on the same kind of
// socket with the same body as the daemon gives the floor a flood cannot
// be answered below.
package floodtest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// Request returns the bytes of an HTTP/1.1 POST of body to path on a
// keep-alive connection.
func Request(path string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
	b.Write(body)
	return b.Bytes()
}

// Client is a set of keep-alive connections to one socket. Run may not be
// called concurrently with itself; Close may be called once.
type Client struct {
	conns []*conn
}

type conn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

// Dial opens n connections to the unix socket at path.
func Dial(path string, n int) (*Client, error) {
	if n < 1 {
		return nil, fmt.Errorf("flood: Dial: %d connections, want at least 1", n)
	}
	c := &Client{}
	for range n {
		nc, err := net.Dial("unix", path)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("flood: Dial: %w", err)
		}
		c.conns = append(c.conns, &conn{c: nc, r: bufio.NewReaderSize(nc, 16<<10), buf: make([]byte, 0, 4096)})
	}
	return c, nil
}

// DialTLS opens n connections to addr with TLS (cfg: the client
// certificate, the server's CA, HTTP/1.1), each with its handshake done.
func DialTLS(addr string, cfg *tls.Config, n int) (*Client, error) {
	if n < 1 {
		return nil, fmt.Errorf("flood: DialTLS: %d connections, want at least 1", n)
	}
	c := &Client{}
	for range n {
		tc, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("flood: DialTLS: %w", err)
		}
		c.conns = append(c.conns, &conn{c: tc, r: bufio.NewReaderSize(tc, 16<<10), buf: make([]byte, 0, 4096)})
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() {
	for _, cn := range c.conns {
		_ = cn.c.Close()
	}
}

// Run sends total requests (req as built by Request), spread evenly over
// the connections, each connection in its own goroutine, and checks that
// every answer has status want. It returns the first failure.
func (c *Client) Run(total int, req []byte, want int) error {
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
		next   atomic.Int64
	)
	for _, cn := range c.conns {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				if err := cn.roundTrip(req, want); err != nil {
					fail(&failed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Flood sends req on every connection at once, each waiting for its
// answer before its next, until stop is closed, and checks that every
// answer has status want. It returns the answers counted and the first
// failure.
func (c *Client) Flood(stop <-chan struct{}, req []byte, want int) (uint64, error) {
	var (
		wg       sync.WaitGroup
		failed   atomic.Pointer[error]
		answered atomic.Uint64
	)
	for _, cn := range c.conns {
		wg.Go(func() {
			var n uint64
			defer func() { answered.Add(n) }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := cn.roundTrip(req, want); err != nil {
					fail(&failed, err)
					return
				}
				n++
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return answered.Load(), *p
	}
	return answered.Load(), nil
}

// Body sends one request on the first connection and returns the answer's
// status, headers and body (for building a floor that answers the same).
func (c *Client) Body(req []byte) (int, http.Header, []byte, error) {
	cn := c.conns[0]
	if _, err := cn.c.Write(req); err != nil {
		return 0, nil, nil, err
	}
	res, err := http.ReadResponse(cn.r, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, body, err
}

// fail records err as the run's failure unless one is recorded (apart from
// Run's loop, so that the error escapes only when there is one).
func fail(failed *atomic.Pointer[error], err error) { failed.CompareAndSwap(nil, &err) }

var errShort = errors.New("flood: malformed answer")

func (cn *conn) roundTrip(req []byte, want int) error {
	if _, err := cn.c.Write(req); err != nil {
		return err
	}
	line, err := cn.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	// "HTTP/1.1 429 Too Many Requests\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return errShort
	}
	status := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	length := -1
	for {
		h, err := cn.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(h) <= 2 { // "\r\n"
			break
		}
		if len(h) > 16 && (h[0] == 'C' || h[0] == 'c') && bytes.EqualFold(h[:15], []byte("Content-Length:")) {
			v := bytes.TrimSpace(h[15:])
			n := 0
			for _, d := range v {
				if d < '0' || d > '9' {
					return errShort
				}
				n = n*10 + int(d-'0')
			}
			length = n
		}
	}
	if length < 0 {
		return errShort
	}
	if cap(cn.buf) < length {
		cn.buf = make([]byte, length)
	}
	if _, err := io.ReadFull(cn.r, cn.buf[:length]); err != nil {
		return err
	}
	if status != want {
		return fmt.Errorf("flood: status %d, want %d: %.200s", status, want, cn.buf[:length])
	}
	return nil
}

// Floor answers every request with status, the headers and body. It reads
// each request body to its end first, as the daemon does. It is safe for
// concurrent use.
type Floor struct {
	status int
	header http.Header
	body   []byte
}

// NewFloor returns a floor answering status, header (copied) and body.
func NewFloor(status int, header http.Header, body []byte) *Floor {
	h := http.Header{}
	for k, v := range header {
		switch k {
		case "Date", "Content-Length":
			continue // net/http writes its own
		}
		h[k] = v
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	return &Floor{status: status, header: h, body: body}
}

var discardPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// ServeHTTP answers the fixed response.
func (f *Floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bp := discardPool.Get().(*[]byte)
	for {
		if _, err := r.Body.Read(*bp); err != nil {
			break
		}
	}
	discardPool.Put(bp)
	h := w.Header()
	for k, v := range f.header {
		h[k] = v
	}
	w.WriteHeader(f.status)
	_, _ = w.Write(f.body)
}
