package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// handshake runs c's TLS handshake within the handshake timeout, then
// admits it.
func (f *frontListener) handshake(c *trackedConn) {
	defer f.wg.Done()
	// The deadline bounds the handshake; closeHandshaking (at shutdown)
	// and the pre-handshake budget end it early by closing the connection.
	ctx, cancel := context.WithTimeout(context.Background(), f.handshakeTimeout)
	defer cancel()
	_ = c.Conn.SetDeadline(time.Now().Add(f.handshakeTimeout))
	tc := tls.Server(c, f.set.tlsConfig)
	err := tc.HandshakeContext(ctx)
	if !f.set.endHandshake(c) {
		return // closed by the pre-handshake budget, and counted
	}
	if err != nil {
		_ = c.Conn.Close()
		reason := ReasonTLSHandshake
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			reason = ReasonHandshakeTimeout
		}
		select {
		case <-f.done:
			return // shutting down: not the caller's fault
		default:
		}
		f.set.events.reject(f.set.kind, reason, append(c.attrs(), slog.String("error", wire.BoundDetail(err.Error())))...)
		return
	}
	_ = c.Conn.SetDeadline(time.Time{})
	c.timeout.Store(false)
	c.read.Store(0)
	st := tc.ConnectionState()
	id, problem := tlsIdentity(&st)
	c.ident = connIdentity{id: id, problem: problem}
	f.admitAndHand(c, tc)
}
