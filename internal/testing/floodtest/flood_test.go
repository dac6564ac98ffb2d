package floodtest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// serve serves h on a unix socket in a short temporary directory.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return path
}

// TestClientAgainstFloor: every request is sent and answered on keep-alive
// connections, the floor reads each body and answers the fixed bytes and
// headers, and a wrong status is reported.
func TestClientAgainstFloor(t *testing.T) {
	var requests, bodyBytes atomic.Int64
	floor := NewFloor(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}, "Date": {"x"}}, []byte(`{"busy":true}`+"\n"))
	path := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		bodyBytes.Add(r.ContentLength)
		floor.ServeHTTP(w, r)
	}))
	body := []byte(`{"protocol_version":1}`)
	req := Request("/v1/mint", body)
	c, err := Dial(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(1000, req, http.StatusTooManyRequests); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != 1000 || bodyBytes.Load() != 1000*int64(len(body)) {
		t.Fatalf("server saw %d requests, %d body bytes", requests.Load(), bodyBytes.Load())
	}
	status, h, got, err := c.Body(req)
	if err != nil || status != http.StatusTooManyRequests || string(got) != `{"busy":true}`+"\n" || h.Get("Retry-After") != "1" {
		t.Fatalf("Body: %d %v %q %v", status, h, got, err)
	}
	err = c.Run(10, req, http.StatusOK)
	if err == nil || !strings.Contains(err.Error(), "status 429, want 200") {
		t.Fatalf("a wrong status gave %v", err)
	}
	if _, err := Dial(path, 0); err == nil {
		t.Fatal("Dial with 0 connections succeeded")
	}
	if _, err := Dial(filepath.Join(filepath.Dir(path), "absent.sock"), 1); err == nil || !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "connect") {
		t.Fatalf("Dial to a missing socket: %v", err)
	}
}

// TestClientAllocatesNothingPerRequest: the load client must not be what
// the flood benchmark measures. The peer is a pipe answering fixed bytes
// without allocating, so every allocation counted is the client's.
func TestClientAllocatesNothingPerRequest(t *testing.T) {
	req := Request("/v1/mint", []byte(`{"protocol_version":1}`))
	answer := []byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"busy\":true}")
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		defer server.Close()
		buf := make([]byte, len(req))
		for {
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			if _, err := server.Write(answer); err != nil {
				return
			}
		}
	}()
	cn := &conn{c: client, r: bufio.NewReaderSize(client, 16<<10), buf: make([]byte, 0, 4096)}
	if n := testing.AllocsPerRun(500, func() {
		if err := cn.roundTrip(req, http.StatusTooManyRequests); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per round trip, want 0", n)
	}
}

// TestFloodRunsUntilStoppedAndCountsEveryAnswer: Flood keeps every
// connection busy until stop is closed, counts what came back, and
// reports a wrong status. Over TLS, DialTLS gives the same client.
func TestFloodRunsUntilStoppedAndCountsEveryAnswer(t *testing.T) {
	var requests atomic.Int64
	stop := make(chan struct{})
	var once sync.Once
	floor := NewFloor(http.StatusTooManyRequests, nil, []byte(`{"busy":true}`+"\n"))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 500 {
			once.Do(func() { close(stop) })
		}
		floor.ServeHTTP(w, r)
	})
	req := Request("/v1/mint", []byte(`{"protocol_version":1}`))
	for _, tc := range []struct {
		name string
		dial func(t *testing.T) (*Client, error)
	}{
		{"unix", func(t *testing.T) (*Client, error) { return Dial(serve(t, h), 4) }},
		{"tls", func(t *testing.T) (*Client, error) {
			srv := httptest.NewTLSServer(h)
			t.Cleanup(srv.Close)
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			return DialTLS(srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}, 4)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			stop, once = make(chan struct{}), sync.Once{}
			c, err := tc.dial(t)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			n, err := c.Flood(stop, req, http.StatusTooManyRequests)
			if err != nil {
				t.Fatal(err)
			}
			if n < 500 || int64(n) != requests.Load() {
				t.Fatalf("Flood counted %d answers, the server saw %d requests; want the same, at least 500", n, requests.Load())
			}
			if _, err := c.Flood(make(chan struct{}), req, http.StatusOK); err == nil || !strings.Contains(err.Error(), "status 429, want 200") {
				t.Fatalf("a wrong status gave %v", err)
			}
		})
	}
	if _, err := DialTLS("127.0.0.1:1", &tls.Config{}, 0); err == nil {
		t.Fatal("DialTLS with 0 connections succeeded")
	}
}
