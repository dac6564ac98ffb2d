package server

// Tests that hold claims hand-made mutants showed nothing held (issue 28):
// an evicted connection flushing its answer is closed once idle, never
// mid-answer (W1); a body of exactly MaxBodyBytes is accepted (W8); a
// closed connection gives its identity's slot back; and the two ways a
// pre-handshake connection ends (its timeout, the budget) are counted
// apart.

import (
	"bufio"
	"github.com/registrar-otel/registrar-otel/wire"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestAConnectionFlushingItsAnswerIsClosedOnlyOnceIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1})
		a := l.dial()
		// A pipe has no buffer: the server's flush blocks until a reads, so
		// a stays "answered, being flushed" while the newcomer arrives.
		if _, err := io.WriteString(a, healthRequest); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b := l.dial()
		synctest.Wait()
		if got := rejected(s, ListenerUnix, ReasonIdleEvicted); got != 1 {
			t.Fatalf("idle_evicted got %d, want 1: the flushing connection was not the one to give way", got)
		}
		res, err := http.ReadResponse(bufio.NewReader(a), nil)
		if err != nil {
			t.Fatalf("the evicted connection's answer was cut off: %v", err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || !strings.Contains(string(body), "registrar_health") {
			t.Fatalf("the evicted connection's answer: status %d, body %q, err %v; want it whole", res.StatusCode, body, err)
		}
		synctest.Wait()
		if !isClosed(a) {
			t.Error("the evicted connection stayed open once idle")
		}
		if st := getHealth(t, b); st != 200 {
			t.Errorf("the newcomer got %d", st)
		}
		a.Close()
		b.Close()
		shutdown(t, s, served)
	})
}

// paddedMint is the pipes' mint body padded with spaces (valid JSON) to n
// bytes.
func paddedMint(n int) string {
	return mintBodyForPipes[:len(mintBodyForPipes)-1] + strings.Repeat(" ", n-len(mintBodyForPipes)) + "}"
}

func TestABodyOfExactlyMaxBodyBytesIsAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		minted := make(chan struct{}, 2)
		release := make(chan struct{})
		close(release)
		s, l, _, served := budgetServer(t, Options{Verbs: blockingMint(minted, release)})
		for _, tc := range []struct {
			size   int
			status int
		}{{wire.MaxBodyBytes, 200}, {wire.MaxBodyBytes + 1, 400}} {
			body := paddedMint(tc.size)
			if len(body) != tc.size {
				t.Fatalf("padded body has %d bytes, want %d", len(body), tc.size)
			}
			c := l.dial()
			req := "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(body)) + "\r\n\r\n" + body
			// A refused body is not read: write it from its own goroutine.
			go io.WriteString(c, req)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%d bytes: %v", tc.size, err)
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("a body of %d bytes got %d (%s), want %d", tc.size, res.StatusCode, answer, tc.status)
			}
			if tc.status == 400 && !strings.Contains(string(answer), "exceeds 65536 bytes") {
				t.Errorf("a body of %d bytes: %s, want the bound named", tc.size, answer)
			}
			c.Close()
		}
		if got := len(minted); got != 1 {
			t.Errorf("the verb ran %d times, want once (only the body within the bound)", got)
		}
		shutdown(t, s, served)
	})
}

func TestAClosedConnectionGivesItsIdentitySlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: 16, MaxConnsPerIdentity: 2})
		for round := range 3 {
			x1, x2 := dialAs(l, ids, "x"), dialAs(l, ids, "x")
			for _, c := range []net.Conn{x1, x2} {
				if st := getHealth(t, c); st != 200 {
					t.Fatalf("round %d: status %d", round, st)
				}
			}
			x1.Close()
			x2.Close()
			synctest.Wait()
			if got := s.Stats().Connections[ListenerUnix]; got != 0 {
				t.Fatalf("round %d: connections got %d after both closed, want 0", round, got)
			}
		}
		if got := rejected(s, ListenerUnix, ReasonIdentityConnCap); got != 0 {
			t.Errorf("identity_conn_cap got %d, want 0: closed connections still counted against x", got)
		}
		if got := rejected(s, ListenerUnix, ReasonIdleEvicted); got != 0 {
			t.Errorf("idle_evicted got %d, want 0: x was at its cap with closed connections", got)
		}
		shutdown(t, s, served)
	})
}

func TestHandshakeTimeoutsAndTheHandshakeCapAreCountedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		s, l, served := tlsPipeServer(t, Options{TLSHandshakeMaxConns: 2, TLSHandshakeTimeout: 2 * time.Second}, p)
		// Two silent connections within the budget: both time out.
		a, b := l.dial(), l.dial()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !isClosed(a) || !isClosed(b) {
			t.Fatal("a silent connection outlived the handshake timeout")
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout); got != 2 {
			t.Errorf("handshake_timeout got %d, want 2", got)
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeCap); got != 0 {
			t.Errorf("handshake_cap got %d, want 0: nothing exceeded the budget", got)
		}
		// Three more at once: the budget closes the oldest (handshake_cap),
		// the other two time out.
		var more []net.Conn
		for range 3 {
			more = append(more, l.dial())
			synctest.Wait()
		}
		if !isClosed(more[0]) {
			t.Fatal("the oldest pre-handshake connection is still open past the budget")
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeCap); got != 1 {
			t.Errorf("handshake_cap got %d, want 1", got)
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout); got != 2 {
			t.Errorf("handshake_timeout got %d before the timeout, want still 2", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout); got != 4 {
			t.Errorf("handshake_timeout got %d, want 4", got)
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeCap); got != 1 {
			t.Errorf("handshake_cap got %d after the timeouts, want still 1", got)
		}
		for _, c := range append(more, a, b) {
			c.Close()
		}
		shutdown(t, s, served)
	})
}
