package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
)

// TestHandshakeTimeoutsAndTheHandshakeCapAreCountedApart holds a claim a
// hand-made mutant showed nothing held (issue 28): the two ways a
// pre-handshake connection ends (its timeout, the budget) are counted
// apart.
func TestHandshakeTimeoutsAndTheHandshakeCapAreCountedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		s, l, served := tlsPipeServer(t, Options{TLSHandshakeMaxConns: 2, TLSHandshakeTimeout: 2 * time.Second}, p)
		// Two silent connections within the budget: both time out.
		a, b := l.Dial(), l.Dial()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !isClosed(a) || !isClosed(b) {
			t.Fatal("a silent connection outlived the handshake timeout")
		}
		wantRejected(t, s, ListenerTLS, ReasonHandshakeTimeout, 2, "")
		wantRejected(t, s, ListenerTLS, ReasonHandshakeCap, 0, ": nothing exceeded the budget")
		// Three more at once: the budget closes the oldest (handshake_cap),
		// the other two time out.
		var more []net.Conn
		for range 3 {
			more = append(more, l.Dial())
			synctest.Wait()
		}
		if !isClosed(more[0]) {
			t.Fatal("the oldest pre-handshake connection is still open past the budget")
		}
		wantRejected(t, s, ListenerTLS, ReasonHandshakeCap, 1, "")
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout); got != 2 {
			t.Errorf("handshake_timeout got %d before the timeout, want still 2", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		wantRejected(t, s, ListenerTLS, ReasonHandshakeTimeout, 4, "")
		if got := rejected(s, ListenerTLS, ReasonHandshakeCap); got != 1 {
			t.Errorf("handshake_cap got %d after the timeouts, want still 1", got)
		}
		for _, c := range append(more, a, b) {
			c.Close()
		}
		shutdown(t, s, served)
	})
}

// sanMarker is text a certificate's maker chose, which no log line may
// carry before the certificate is verified (issue 41).
const sanMarker = "evil-marker"

// unparseableCert is a client certificate whose URI SAN does not parse
// (a bad percent-escape): x509's parse error quotes it.
func unparseableCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	uri := "spiffe://" + sanMarker + "/%zz"
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(uri)}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:    big.NewInt(1),
		NotBefore:       time.Now().Add(-time.Hour),
		NotAfter:        time.Now().Add(time.Hour),
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: san}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x509.ParseCertificate(der); err == nil || !strings.Contains(err.Error(), sanMarker) {
		t.Fatalf("the crafted certificate parses (%v): the test would prove nothing", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The handshake's WARN line never quotes a certificate that was not
// verified: a certificate whose SAN does not parse is logged without its
// text, over a real handshake.
func TestAFailedHandshakeNeverLogsTheCertificatesText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		rec := &logRecorder{}
		s, l, served := tlsPipeServer(t, Options{Logger: slog.New(rec)}, p)
		bad := unparseableCert(t)
		if !tlsRefused(l, p, &bad) {
			t.Fatal("a handshake with an unparseable certificate succeeded")
		}
		synctest.Wait()
		lines := rec.rejections()
		if len(lines) != 1 || lines[0]["error"] == "" {
			t.Fatalf("WARN lines %v, want one tls_handshake line", lines)
		}
		if strings.Contains(lines[0]["error"], sanMarker) || !strings.Contains(lines[0]["error"], "withheld") {
			t.Fatalf("the WARN line's error %q quotes the unverified certificate, or does not say its text was withheld", lines[0]["error"])
		}
		shutdown(t, s, served)
	})
}

// handshakeDetail names a verification failure by its kind and the
// certificate's fingerprint, never by x509's text, which quotes the
// certificate's names.
func TestHandshakeDetailNamesAVerificationFailureByFingerprint(t *testing.T) {
	cert := pkitest.New(t).Client(t, "spiffe://"+sanMarker+"/x")
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(leaf.Raw)
	fp := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		cause error
		kind  string
	}{
		{x509.CertificateInvalidError{Cert: leaf, Reason: x509.CANotAuthorizedForThisName, Detail: "URI " + sanMarker + " is excluded"}, "outside its issuer's name constraints"},
		{x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired, Detail: sanMarker}, "expired or not yet valid"},
		{x509.CertificateInvalidError{Cert: leaf, Reason: x509.IncompatibleUsage, Detail: sanMarker}, "not for client authentication"},
		{x509.CertificateInvalidError{Cert: leaf, Reason: x509.NotAuthorizedToSign, Detail: sanMarker}, "may not sign"},
		{x509.CertificateInvalidError{Cert: leaf, Reason: x509.TooManyIntermediates, Detail: sanMarker}, "x509 reason 3"},
		{x509.UnknownAuthorityError{Cert: leaf}, "unknown authority"},
		{errors.New(sanMarker), "not verified"},
	} {
		err := fmt.Errorf("tls: failed to verify certificate: %w", &tls.CertificateVerificationError{UnverifiedCertificates: []*x509.Certificate{leaf}, Err: c.cause})
		got := handshakeDetail(err)
		if strings.Contains(got, sanMarker) || !strings.Contains(got, c.kind) || !strings.Contains(got, "sha256 "+fp) {
			t.Errorf("%v: handshakeDetail = %q, want %q and the fingerprint, never the certificate's text", c.cause, got, c.kind)
		}
	}
	if got := handshakeDetail(&tls.CertificateVerificationError{Err: errors.New(sanMarker)}); !strings.Contains(got, "sha256 none") {
		t.Errorf("no certificate: %q", got)
	}
	if got := handshakeDetail(errors.New("tls: client didn't provide a certificate")); got != "tls: client didn't provide a certificate" {
		t.Errorf("an error quoting no certificate is kept as it is; got %q", got)
	}
	// x509's text withheld wherever it starts, the very start included.
	for _, msg := range []string{"tls: failed to parse client certificate: x509: " + sanMarker, "x509: " + sanMarker} {
		if got := handshakeDetail(errors.New(msg)); strings.Contains(got, sanMarker) || !strings.Contains(got, "withheld") {
			t.Errorf("handshakeDetail(%q) = %q, want x509's text withheld", msg, got)
		}
	}
}
