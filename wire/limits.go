package wire

import "time"

// The protocol's timeouts: a Server's defaults (server.Options), and what
// the Client's transport is tuned to, so that a kept-alive connection is
// dropped by the client before the server drops it.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers (and
	// the client's TLS handshake).
	DefaultReadHeaderTimeout = 3 * time.Second
	// DefaultReadTimeout bounds reading a whole request.
	DefaultReadTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its response.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds a keep-alive connection's wait for its
	// next request.
	DefaultIdleTimeout = 15 * time.Second
)

// MaxHeaderBytes bounds a request's header block (16 KiB): the request
// line, the header fields and the blank line, exactly; a larger block is
// answered 431 and its connection closed.
const MaxHeaderBytes = 16 << 10
