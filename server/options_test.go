package server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/wire"
)

func TestEachListenerKindGetsItsOwnCaps(t *testing.T) {
	o := Options{UnixMaxConns: 3, TLSMaxConns: 5, MaxConnsPerIdentity: 2, TLSHandshakeMaxConns: 7}
	for kind, want := range map[ListenerKind]budgetLimits{
		ListenerUnix: {maxConns: 3, perIdentity: 2, maxHS: 7},
		ListenerTLS:  {maxConns: 5, perIdentity: 2, maxHS: 7},
	} {
		if got := o.budget(kind); got != want {
			t.Errorf("%v listener: got %+v, want %+v", kind, got, want)
		}
	}
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
		s.srv.WriteTimeout != wire.DefaultWriteTimeout || s.srv.IdleTimeout != wire.DefaultIdleTimeout || s.srv.MaxHeaderBytes != wire.MaxHeaderBytes-httpHeaderSlack {
		t.Errorf("timeouts got %v/%v/%v/%v, header bound %d; want the defaults",
			s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout, s.srv.MaxHeaderBytes)
	}
}

// Issue 41: the header bound is the documented 16 KiB exactly (net/http's
// own slack taken off): a 16,384-byte header block, request line and blank
// line included, is served; one byte more, and a 17 KiB block, are
// answered 431 without a protocol body.
func TestTheHeaderBlockIsBoundedAtExactlySixteenKiB(t *testing.T) {
	s, l, served := pipeServer(t, Options{})
	defer shutdown(t, s, served)
	status := func(n int) (int, string) {
		head := "GET /v1/health HTTP/1.1\r\nHost: registrar\r\nX-Pad: "
		req := head + strings.Repeat("a", n-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
		c := l.Dial()
		defer c.Close()
		go io.WriteString(c, req) // a refused block is not read to its end
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a %d-byte header block: %v", n, err)
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		res.Body.Close()
		return res.StatusCode, string(body)
	}
	if got, _ := status(wire.MaxHeaderBytes); got != http.StatusOK {
		t.Errorf("a header block of exactly %d bytes: %d, want 200", wire.MaxHeaderBytes, got)
	}
	for _, n := range []int{wire.MaxHeaderBytes + 1, 17 << 10} {
		if got, body := status(n); got != http.StatusRequestHeaderFieldsTooLarge || strings.Contains(body, "error_id") {
			t.Errorf("a %d-byte header block: %d %q, want 431 without a protocol body", n, got, body)
		}
	}
}
