package wire

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
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
	b, err := s.appendResponse((*bp)[:0], v)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelError, "encoding a response failed", slog.Any("error", err))
		status = http.StatusInternalServerError
		b = append(b[:0], `{"protocol_version":1,"request_id":"`+s.ids.next()+`","class":"permanent","error":{"id":"RegistrarUnavailable"},"registrar_health":{}}`...)
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
	if cap(b) > 2*MaxBodyBytes {
		*bp = nil // never keep an outsized buffer
	}
}
