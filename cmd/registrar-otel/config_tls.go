package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/server"
)

// tlsFinding is one TLS file config check read.
type tlsFinding struct {
	Key    string `json:"key"`
	Path   string `json:"path"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// checkTLS checks the listener's certificate, key and client CA when
// registrar.tls_listen is set: each file exists, is readable and parses,
// the key matches the certificate, and the certificate is within its
// validity. Each problem is its own error naming the key and the file.
func checkTLS(res *checkResult, cfg *config.Config) {
	r := &cfg.Registrar
	if r.TLSListen == "" {
		return
	}
	read := func(key, path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			res.TLS = append(res.TLS, tlsFinding{key, path, false, unwrapPath(err).Error()})
			res.errorf(key, "%s: cannot read %v", key, unwrapPath(err))
			return nil
		}
		return b
	}
	certPEM := read("registrar.tls_cert_file", r.TLSCertFile)
	keyPEM := read("registrar.tls_key_file", r.TLSKeyFile)
	caPEM := read("registrar.tls_client_ca_file", r.TLSClientCAFile)

	ok := true
	bad := func(key, path, format string, args ...any) {
		ok = false
		msg := fmt.Sprintf(format, args...)
		res.TLS = append(res.TLS, tlsFinding{key, path, false, msg})
		res.errorf(key, "%s %s: %s", key, path, msg)
	}
	now := time.Now()
	if certPEM != nil {
		certs, err := parseCerts(certPEM)
		switch {
		case err != nil:
			bad("registrar.tls_cert_file", r.TLSCertFile, "%v", err)
		case now.After(certs[0].NotAfter):
			bad("registrar.tls_cert_file", r.TLSCertFile, "the certificate expired on %s", certs[0].NotAfter.UTC().Format(time.RFC3339))
		case now.Before(certs[0].NotBefore):
			bad("registrar.tls_cert_file", r.TLSCertFile, "the certificate is not valid before %s", certs[0].NotBefore.UTC().Format(time.RFC3339))
		default:
			res.TLS = append(res.TLS, tlsFinding{"registrar.tls_cert_file", r.TLSCertFile, true,
				fmt.Sprintf("certificate %q, valid until %s", certs[0].Subject.String(), certs[0].NotAfter.UTC().Format(time.RFC3339))})
		}
	}
	if certPEM != nil && keyPEM != nil && ok {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			bad("registrar.tls_key_file", r.TLSKeyFile, "does not go with the certificate in %s: %v", r.TLSCertFile, err)
		} else {
			res.TLS = append(res.TLS, tlsFinding{"registrar.tls_key_file", r.TLSKeyFile, true, "private key matching the certificate"})
		}
	}
	if caPEM != nil {
		cas, err := parseCerts(caPEM)
		if err != nil {
			bad("registrar.tls_client_ca_file", r.TLSClientCAFile, "%v", err)
		} else {
			res.TLS = append(res.TLS, tlsFinding{"registrar.tls_client_ca_file", r.TLSClientCAFile, true, fmt.Sprintf("%d CA certificate(s)", len(cas))})
		}
	}
	// What serve itself does with the three files, so the two never
	// disagree.
	if ok && certPEM != nil && keyPEM != nil && caPEM != nil {
		if _, err := server.ServerTLSConfig(r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile); err != nil {
			res.errorf("registrar.tls_listen", "registrar.tls_listen: serve would refuse the TLS files: %v", err)
		}
	}
}

// parseCerts parses every CERTIFICATE block of a PEM file; it fails when
// there is none or one does not parse.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM certificate in it")
	}
	return out, nil
}
