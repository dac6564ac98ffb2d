package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// recordingBody is a request body of declared length whose reader either
// reports its end (as net/http's does once the declared length is read) or
// still has bytes beyond what was declared.
type recordingBody struct {
	data   []byte
	atEOF  bool // Read at the end returns io.EOF rather than (0, nil)
	closed bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		if b.atEOF {
			return 0, io.EOF
		}
		return 0, nil
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *recordingBody) Close() error { b.closed = true; return nil }

// TestAFullyReadBodyIsClosedAndOnlyThen: readRequest closes a declared-
// length body once its reader has seen the end (so net/http has nothing to
// discard after the handler, an allocation per request saved), and never a
// body whose reader has not (closing it would cost the connection its
// keep-alive).
func TestAFullyReadBodyIsClosedAndOnlyThen(t *testing.T) {
	body := []byte(`{"protocol_version":1}`)
	for _, tc := range []struct {
		name      string
		atEOF     bool
		wantClose bool
	}{
		{"reader at its end", true, true},
		{"reader not at its end", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb := &recordingBody{data: bytes.Clone(body), atEOF: tc.atEOF}
			r := httptest.NewRequest("POST", wire.PathMint, nil)
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, connIdentity{id: "unix-peer:uid=1000"}))
			r.Header.Set("Content-Type", "application/json")
			r.Body, r.ContentLength = rb, int64(len(body))
			buf := getBuf()
			defer putBuf(buf)
			if _, ok := (&Server{}).readRequest(httptest.NewRecorder(), r, buf); !ok {
				t.Fatal("readRequest refused a well-formed request")
			}
			if !bytes.Equal(buf.Bytes(), body) {
				t.Errorf("body read %q, want %q", buf.Bytes(), body)
			}
			if rb.closed != tc.wantClose {
				t.Errorf("body closed = %v, want %v", rb.closed, tc.wantClose)
			}
		})
	}
}

// The body buffers' pool keeps a buffer of up to twice MaxBodyBytes and
// never one larger: an outsized buffer put back is never handed out again,
// while one of exactly the bound comes back (a pool may drop what it
// holds, so it is put back until it does, or a hundred times).
func TestThePoolKeepsBodyBuffersUpToTwiceTheBoundOnly(t *testing.T) {
	outsized := bytes.NewBuffer(make([]byte, 0, 2*wire.MaxBodyBytes+1))
	bound := bytes.NewBuffer(make([]byte, 0, 2*wire.MaxBodyBytes))
	back := false
	for range 100 {
		outsized.WriteString("x")
		putBuf(outsized)
		bound.WriteString("x")
		putBuf(bound)
		var got []*bytes.Buffer
		for range 2 {
			b := getBuf()
			if b == outsized {
				t.Fatal("the pool handed out a buffer larger than twice MaxBodyBytes")
			}
			if b == bound {
				if b.Len() != 0 {
					t.Fatalf("a pooled buffer came back holding %q", b.Bytes())
				}
				back = true
			}
			got = append(got, b)
		}
		for _, b := range got {
			if b != bound {
				putBuf(b)
			}
		}
		if back {
			return
		}
	}
	t.Error("a buffer of exactly twice MaxBodyBytes never came back from the pool in 100 puts")
}

// TestABodyOfExactlyMaxBodyBytesIsAccepted holds mutant W8 (issue 28): a
// body of exactly MaxBodyBytes is accepted, one byte more is RequestMalformed.
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
			body := wiretest.Pad(mintBodyForPipes, tc.size)
			if len(body) != tc.size {
				t.Fatalf("padded body has %d bytes, want %d", len(body), tc.size)
			}
			c := l.Dial()
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
