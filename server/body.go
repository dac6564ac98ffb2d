package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/registrar-otel/registrar-otel/wire"
)

// readRequest does everything before a verb runs: identity, content type,
// body. ok false means a RequestMalformed answer was written.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (id string, ok bool) {
	id, problem := identity(r)
	if problem != "" {
		s.malformedAs(w, r, ReasonNoIdentity, http.StatusBadRequest, problem)
		return "", false
	}
	if problem := checkContentType(r.Header.Get("Content-Type")); problem != "" {
		s.malformed(w, r, http.StatusBadRequest, problem)
		return "", false
	}
	if r.ContentLength > wire.MaxBodyBytes {
		s.malformed(w, r, http.StatusBadRequest, fmt.Sprintf("request body exceeds %d bytes", wire.MaxBodyBytes))
		return "", false
	}
	if r.ContentLength >= 0 {
		// The length is declared and within the bound: net/http's body
		// reader stops there, so no MaxBytesReader (an allocation) is needed.
		if err := readDeclared(buf, r.Body, int(r.ContentLength)); err != nil {
			s.malformed(w, r, http.StatusBadRequest, "request body could not be read")
			return "", false
		}
		// Once net/http's body reader has seen its end, closing it tells
		// the server there is nothing left to discard after the handler
		// (otherwise it copies the rest away through a fresh LimitReader,
		// an allocation per request). Only then: closing a body with
		// unread bytes would cost the connection its keep-alive.
		if n, err := r.Body.Read(nil); n == 0 && err == io.EOF {
			_ = r.Body.Close()
		}
		return id, true
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.malformed(w, r, http.StatusBadRequest, fmt.Sprintf("request body exceeds %d bytes", wire.MaxBodyBytes))
		} else {
			s.malformed(w, r, http.StatusBadRequest, "request body could not be read")
		}
		return "", false
	}
	return id, true
}

// readDeclared reads a body of declared length n (≤ MaxBodyBytes) into buf.
func readDeclared(buf *bytes.Buffer, body io.Reader, n int) error {
	buf.Grow(n)
	b := buf.AvailableBuffer()[:n]
	if _, err := io.ReadFull(body, b); err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// checkContentType accepts application/json, with or without parameters;
// a charset, if given, must be utf-8.
func checkContentType(ct string) (problem string) {
	switch ct {
	case "application/json", "application/json; charset=utf-8":
		return "" // what every client sends, without parsing
	}
	if ct == "" {
		return "Content-Type: required, want application/json"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return "Content-Type: want application/json"
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "Content-Type: the charset must be utf-8"
	}
	return ""
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer { return bufPool.Get().(*bytes.Buffer) }

func putBuf(b *bytes.Buffer) {
	if b.Cap() > 2*wire.MaxBodyBytes {
		return // never keep an outsized buffer
	}
	b.Reset()
	bufPool.Put(b)
}
