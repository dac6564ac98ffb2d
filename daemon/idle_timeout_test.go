package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestIdleTimeoutReachesTheServer holds that registrar.idle_timeout_ms is
// the wire server's idle timeout (and not, say, the header timeout): with
// a short idle timeout and a long header timeout, a keep-alive connection
// that sends nothing after its first answer is closed by the server. The
// test waits for that close (an event, bounded by a deadline far above the
// idle timeout), never for a fixed time.
func TestIdleTimeoutReachesTheServer(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.IdleTimeoutMS = 50
	cfg.Registrar.ReadHeaderTimeoutMS = 600_000
	start(t, cfg)
	c, err := net.Dial("unix", cfg.Registrar.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Close {
		t.Fatalf("health: status %d, close %v; want 200 on a keep-alive connection", res.StatusCode, res.Close)
	}
	// Far above 50 ms, far below the 600 s header timeout.
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := br.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the idle keep-alive connection outlived idle_timeout_ms = 50 by 20 s: the setting did not reach the server")
	}
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after the answer: %d bytes, %v; want the server's close (EOF)", n, err)
	}
}
