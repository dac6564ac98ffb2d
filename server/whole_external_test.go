package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A chunked body the caller stops sending (it half-closes its connection
// part-way through a chunk) is answered RequestMalformed as unreadable:
// the read's error reaches the handler after the bytes read before it,
// not a clean end that would pass the truncated JSON off as the whole body.
func TestABodyCutShortByItsCallerIsAnsweredAsUnreadable(t *testing.T) {
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	c, err := net.Dial("unix", serveUnix(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{\"protocol_version\":1"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body cut short: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "request body could not be read") {
		t.Fatalf("got %d %s, want 400 RequestMalformed saying the body could not be read", res.StatusCode, body)
	}
}
