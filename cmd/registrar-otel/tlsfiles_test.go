package main

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
)

// tlsFiles writes a CA (valid 2020 to 2099), a server certificate it
// signed for localhost (valid from notBefore to notAfter, CN
// registrar-test) and the server's key into dir as server.crt, server.key
// and ca.crt, and returns their paths.
func tlsFiles(t *testing.T, dir string, notBefore, notAfter time.Time) (cert, key, ca string) {
	t.Helper()
	pki := pkitest.NewValid(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := pki.Issue(t, pkitest.Options{CommonName: "registrar-test", DNS: []string{"localhost"}, Usage: x509.ExtKeyUsageServerAuth,
		NotBefore: notBefore, NotAfter: notAfter})
	ca, cert, key = pki.WriteFiles(t, dir, "server", srv)
	return cert, key, ca
}

// validTLSFiles is tlsFiles valid from 2020 to 2099.
func validTLSFiles(t *testing.T, dir string) (cert, key, ca string) {
	return tlsFiles(t, dir, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
}
