package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
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
		f.set.events.reject(f.set.kind, reason, append(c.attrs(), slog.String("error", wire.BoundDetail(handshakeDetail(err))))...)
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

// handshakeDetail is what the log says of a failed handshake: never text
// from a certificate that was not verified. x509's errors quote the
// certificate's names and its issuer's, which whoever made the
// certificate chose, so a verification failure is named by its kind and
// the certificate's SHA-256 fingerprint (which finds it in a capture or a
// CA's records), and any other error quoting x509 is cut before the quote.
func handshakeDetail(err error) string {
	if ve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		fp := "none"
		if len(ve.UnverifiedCertificates) > 0 {
			sum := sha256.Sum256(ve.UnverifiedCertificates[0].Raw)
			fp = hex.EncodeToString(sum[:])
		}
		return "tls: client certificate not verified: " + verificationKind(ve.Err) + " (certificate sha256 " + fp + ")"
	}
	msg := err.Error()
	if i := strings.Index(msg, "x509:"); i >= 0 {
		return strings.TrimRight(msg[:i], ": ") + " (the certificate's own text withheld)"
	}
	return msg
}

// verificationKind names why x509 did not verify a certificate, in words
// of its own, quoting nothing from the certificate.
func verificationKind(err error) string {
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return "signed by an unknown authority"
	}
	if e, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		switch e.Reason {
		case x509.Expired:
			return "expired or not yet valid"
		case x509.IncompatibleUsage:
			return "not for client authentication (extended key usage)"
		case x509.NotAuthorizedToSign:
			return "its issuer may not sign certificates"
		case x509.CANotAuthorizedForThisName, x509.NameConstraintsWithoutSANs, x509.UnconstrainedName, x509.TooManyConstraints:
			return "outside its issuer's name constraints"
		}
		return "invalid (x509 reason " + strconv.Itoa(int(e.Reason)) + ")"
	}
	return "not verified"
}
