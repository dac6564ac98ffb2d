package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// refuse answers a verb error.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status, body, retryAfter, ierr := wire.RefusalFor(err)
	if ierr != nil {
		s.internal(w, r, registrar.RequestIDOf(err), fmt.Errorf("%w (verb error: %v)", ierr, err))
		return
	}
	body.RegistrarHealth = s.healthJSON()
	s.write(w, status, &body, retryAfter)
}

// internal answers what the wire cannot map: 500, RegistrarUnavailable
// without a reason. Unreachable while the mapping tests pass.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, requestID string, err error) {
	if requestID == "" {
		requestID = s.nextID()
	}
	s.logger.LogAttrs(r.Context(), slog.LevelError, "internal error: verb answer has no wire mapping",
		slog.String("request_id", requestID), slog.String("path", r.URL.Path), slog.Any("error", err))
	s.write(w, http.StatusInternalServerError, &wire.RefusalResponse{
		ProtocolVersion: wire.ProtocolVersion,
		RequestID:       requestID,
		Class:           wire.Permanent,
		Error:           wire.ErrorBody{ID: wire.RegistrarUnavailable},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

func (s *Server) malformedErr(w http.ResponseWriter, r *http.Request, err error) {
	var me *wire.MalformedError
	if errors.As(err, &me) {
		s.malformed(w, r, http.StatusBadRequest, me.Detail)
		return
	}
	s.malformed(w, r, http.StatusBadRequest, "request rejected by the codec")
}

// malformed answers RequestMalformed. It runs before any verb: nothing is
// charged or recorded. The log is debug-level: a caller controls how many
// of these it provokes.
func (s *Server) malformed(w http.ResponseWriter, r *http.Request, status int, detail string) {
	s.malformedAs(w, r, ReasonMalformed, status, detail)
}

// malformedAs answers RequestMalformed and counts the rejection under
// reason (malformed, or no_identity).
func (s *Server) malformedAs(w http.ResponseWriter, r *http.Request, reason Reason, status int, detail string) {
	id := s.nextID()
	detail = wire.BoundDetail(detail)
	attrs := []slog.Attr{slog.String("path", wire.BoundDetail(r.URL.Path)), slog.String("detail", detail)}
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		attrs = append(attrs, tc.attrs()...)
	}
	s.reject(listenerOf(r), reason, attrs...)
	s.logger.LogAttrs(r.Context(), slog.LevelDebug, "request malformed",
		slog.String("request_id", id), slog.String("path", wire.BoundDetail(r.URL.Path)), slog.String("detail", detail))
	s.write(w, status, &wire.RefusalResponse{
		ProtocolVersion: wire.ProtocolVersion,
		RequestID:       id,
		Class:           wire.Permanent,
		Error:           wire.ErrorBody{ID: wire.RequestMalformed, Detail: detail},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}
