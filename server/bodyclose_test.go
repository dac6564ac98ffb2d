package server

import (
	"bytes"
	"context"
	"github.com/registrar-otel/registrar-otel/wire"
	"io"
	"net/http/httptest"
	"testing"
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
