package server

import (
	"net/http"
)

// SetRequestIDs replaces the server's wire-level request id generator
// (golden fixtures need stable bytes). Call before serving.
func SetRequestIDs(s *Server, next func() string) { s.nextID = next }

// SetHandler replaces the handler behind the server's plumbing (listeners,
// connection budgets, identity, timeouts), for the no-op benchmark peer.
// Call before serving.
func SetHandler(s *Server, h http.Handler) { s.inner = h }

// NextWireID draws a wire-level request id, for its format test.
func NextWireID(s *Server) string { return s.nextID() }

// SetAfterDrain sets a function Shutdown calls once the grace period's end
// has closed the connections without a request in flight, before it waits
// for the handlers still running. Call before Shutdown.
func SetAfterDrain(s *Server, f func()) { s.afterDrain = f }
