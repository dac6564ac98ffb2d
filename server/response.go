package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/wire"
)

// emptyHealth is served if the holder has no snapshot (it always has one:
// health.NewHolder refreshes once).
var emptyHealth = json.RawMessage(`{}`)

func (s *Server) healthJSON() json.RawMessage {
	if snap := s.health.Current(); snap != nil && len(snap.JSON) > 0 {
		return snap.JSON
	}
	return emptyHealth
}

var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// write encodes v and answers with it. retryAfter > 0 sets Retry-After.
func (s *Server) write(w http.ResponseWriter, status int, v any, retryAfter uint64) {
	bp := respBufPool.Get().(*[]byte)
	defer respBufPool.Put(bp)
	b, err := s.enc.Append((*bp)[:0], v)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelError, "encoding a response failed", slog.Any("error", err))
		status = http.StatusInternalServerError
		b = append(b[:0], `{"protocol_version":1,"request_id":"`+s.nextID()+`","class":"permanent","error":{"id":"RegistrarUnavailable"},"registrar_health":{}}`...)
		retryAfter = 0
	}
	b = append(b, '\n')
	*bp = b
	h := w.Header()
	h["Content-Type"] = headerJSON
	// Material is a secret: no cache may keep any answer.
	h["Cache-Control"] = headerNoStore
	h["Content-Length"] = contentLengths.get(uint64(len(b)))
	if retryAfter > 0 {
		h["Retry-After"] = retryAfters.get(retryAfter)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b) // a caller that hung up cannot be answered
	clear(b)          // a mint's answer holds a secret: keep no copy in the pool
	if cap(b) > 2*wire.MaxBodyBytes {
		*bp = nil // never keep an outsized buffer
	}
}

// respBufPool holds response buffers; an answer is a few hundred bytes.
var respBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxCachedHeaderValue bounds the header value caches: Content-Length of
// an ordinary answer, Retry-After up to an hour.
const maxCachedHeaderValue = 4096

// headerValues caches the one-element []string header values of small
// numbers, so an answer's Content-Length and Retry-After cost no
// allocation. The slices are shared and never modified.
type headerValues [maxCachedHeaderValue]atomic.Pointer[[]string]

var (
	contentLengths headerValues
	retryAfters    headerValues
)

func (c *headerValues) get(n uint64) []string {
	if n >= maxCachedHeaderValue {
		return []string{strconv.FormatUint(n, 10)}
	}
	if p := c[n].Load(); p != nil {
		return *p
	}
	v := []string{strconv.FormatUint(n, 10)}
	c[n].Store(&v)
	return v
}
