package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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
	s.pace(r, err)
	body.RegistrarHealth = s.healthJSON()
	s.write(w, status, &body, retryAfter)
}

// pace holds a refusal the limiter decided (the admission throttle's
// RegistrarBusy, a pre-derivation refusal past its bucket) for the refusal
// pace before it is answered, while another identity is calling: the
// request keeps its seat meanwhile, so an identity whose calls are refused
// as fast as it sends them (a flood: its refusals are its whole cost) has
// at most its seats' worth of calls answered per pace, and its client and
// the daemon leave the cores to the identities it shares them with. Fair
// dispatch alone bounds what a flood holds inside the daemon, not the
// cores its cheap answers and their client take (issue 39's run: the
// flood never waited for a seat). Alone, an identity is never paced: the
// flood against the floor, a wave throttled by its own budget, are
// answered at once. A caller told to retry after at least a second loses
// nothing to an answer a few tens of milliseconds late (the pace is at
// most MaxRefusalPace, the least retry_after). The hold ends early when
// the request's context does: its connection closed, or the server's.
func (s *Server) pace(r *http.Request, err error) {
	d := time.Duration(s.refusalPace.Load())
	if d <= 0 || !s.gate.contended() || !limiterDecided(err) {
		return
	}
	tc, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok || tc.turn.Load() != turnSeated {
		return // not seated by the gate: nothing of the flood's to hold
	}
	s.stats.refusalsPaced[tc.set.kind].Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done(): // the connection closed (net/http reads on after the body), or the server
	}
}

// limiterDecided reports whether err is an answer the limiter chose
// without the verb doing its work: throttled by the admission bucket, or
// refused with the refusal's records suppressed past its bucket.
func limiterDecided(err error) bool {
	var thr *registrar.ThrottledError
	if errors.As(err, &thr) {
		return true
	}
	var ref *registrar.RefusedError
	return errors.As(err, &ref) && ref.Limited
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
