package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
	"go.opentelemetry.io/otel/propagation"
)

// verbContext is the request's context with the caller's W3C trace
// context extracted, so the verbs' server span is the caller's child.
func verbContext(r *http.Request) context.Context {
	// Most callers (every anonymous flood) send no traceparent: then there
	// is nothing to extract, and looking the lower-case name up through
	// the carrier would canonicalise it into a fresh string on every call.
	// net/http stores the request's header names canonicalised, so the
	// map lookup is exact.
	if _, ok := r.Header["Traceparent"]; !ok {
		return r.Context()
	}
	return propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
}

func (s *Server) mint(w http.ResponseWriter, r *http.Request) {
	buf := getBuf()
	defer putBuf(buf)
	caller, ok := s.readRequest(w, r, buf)
	if !ok {
		return
	}
	req, err := wire.DecodeMint(buf.Bytes())
	if err != nil {
		s.malformedErr(w, r, err)
		return
	}
	tc := connOf(r)
	prepared := callerOf(r, tc, caller)
	res, err := s.verbs.Mint(verbContext(r), registrar.MintRequest{
		CallerIdentity: caller,
		CallerSubuid:   subordinateUID(r),
		Caller:         prepared,
		ServiceName:    req.ServiceName,
		Host:           req.Host,
		Instance:       req.Instance,
		Component:      req.Component,
		Spec:           registrar.Spec(req.Spec),
		WrapTTLSeconds: req.WrapTTL,
		IdempotencyKey: req.IdempotencyKey,
	})
	s.setRateLimit(w, tc, prepared, caller, vocab.Mint)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	// The wire spelling is the outcome's own (registrar's String); an
	// outcome the wire does not know has none and is answered 500.
	if o := res.Outcome; o != registrar.FirstMint && o != registrar.IdempotentRemint {
		s.internal(w, r, res.RequestID, fmt.Errorf("%w: mint outcome %d has no spelling", wire.ErrUnmappable, uint8(o)))
		return
	}
	s.write(w, http.StatusOK, &wire.MintResponse{
		ProtocolVersion: wire.ProtocolVersion,
		RequestID:       res.RequestID,
		RegistrationID:  res.RegistrationID,
		Outcome:         res.Outcome.String(),
		Material: wire.Material{
			RoleID:          res.Material.RoleID,
			WrappedSecretID: res.Material.WrappedSecretID,
			ExpiresAt:       res.Material.ExpiresAt.UTC().Format(wire.TimeLayout),
		},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	buf := getBuf()
	defer putBuf(buf)
	caller, ok := s.readRequest(w, r, buf)
	if !ok {
		return
	}
	req, err := wire.DecodeDeregister(buf.Bytes())
	if err != nil {
		s.malformedErr(w, r, err)
		return
	}
	tc := connOf(r)
	prepared := callerOf(r, tc, caller)
	res, err := s.verbs.Deregister(verbContext(r), registrar.DeregisterRequest{
		CallerIdentity: caller,
		CallerSubuid:   subordinateUID(r),
		Caller:         prepared,
		ServiceName:    req.ServiceName,
		Host:           req.Host,
		Instance:       req.Instance,
		Component:      req.Component,
		IdempotencyKey: req.IdempotencyKey,
	})
	s.setRateLimit(w, tc, prepared, caller, vocab.Deregister)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	// The wire spelling is the outcome's own, as for a mint.
	if o := res.Outcome; o != registrar.Removed && o != registrar.AlreadyAbsent {
		s.internal(w, r, res.RequestID, fmt.Errorf("%w: deregister outcome %d has no spelling", wire.ErrUnmappable, uint8(o)))
		return
	}
	s.write(w, http.StatusOK, &wire.DeregisterResponse{
		ProtocolVersion: wire.ProtocolVersion,
		RequestID:       res.RequestID,
		RegistrationID:  res.RegistrationID,
		Outcome:         res.Outcome.String(),
		RegistrarHealth: s.healthJSON(),
	}, 0)
}
