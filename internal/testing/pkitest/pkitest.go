// Package pkitest is a throwaway certificate authority for tests: an ECDSA
// P-256 CA made in memory, leaf certificates it signs with the SANs, key
// usage and validity a test asks for, the PEM files a listener reads, and
// the pool a peer verifies against.
//
// It exists so the tests of the mutual-TLS listener, the daemon and
// config check share one CA instead of each carrying a copy. It is for
// _test.go files only: every function takes a testing.TB and reports a
// failure with t.Fatal, never a panic. The odd certificates tests need are
// made with the same calls: another CA's certificate is New(t).Client(…),
// an expired one sets Options.NotAfter in the past, a wrong extended key
// usage sets Options.Usage, a certificate with no SAN is Client(t).
//
// Times come from time.Now when New is called, so a CA made inside a
// testing/synctest bubble is valid on the bubble's clock.
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority held in memory. It is safe for concurrent
// use: Issue may be called from several goroutines.
type CA struct {
	cert      *x509.Certificate
	der       []byte
	key       *ecdsa.PrivateKey
	notBefore time.Time
	notAfter  time.Time
	serial    atomic.Int64 // the last serial number given; the CA's own is 1
}

// Options describe one leaf certificate.
type Options struct {
	// CommonName is the subject's CN; "" means "leaf". The registrar never
	// reads it, so a certificate without SANs still has one.
	CommonName string
	// URIs, DNS and IPs are the subject alternative names, in order.
	// Each of URIs must parse as a URL.
	URIs []string
	DNS  []string
	IPs  []net.IP
	// Usage is the one extended key usage: x509.ExtKeyUsageServerAuth or
	// x509.ExtKeyUsageClientAuth. The zero value (x509.ExtKeyUsageAny) is
	// refused, so that a forgotten Usage cannot make a certificate good
	// for every purpose.
	Usage x509.ExtKeyUsage
	// NotBefore and NotAfter bound the validity; a zero value takes the
	// CA's own bound.
	NotBefore, NotAfter time.Time
}

// New returns a CA valid from an hour before now to an hour after.
func New(t testing.TB) *CA {
	t.Helper()
	now := time.Now()
	return NewValid(t, now.Add(-time.Hour), now.Add(time.Hour))
}

// NewValid returns a CA valid from notBefore to notAfter.
func NewValid(t testing.TB, notBefore, notAfter time.Time) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("pkitest: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "registrar test CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("pkitest: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("pkitest: CA certificate: %v", err)
	}
	ca := &CA{cert: cert, der: der, key: key, notBefore: notBefore, notAfter: notAfter}
	ca.serial.Store(1)
	return ca
}

// Issue signs a new leaf certificate with a fresh key.
func (ca *CA) Issue(t testing.TB, o Options) tls.Certificate {
	t.Helper()
	if o.Usage == x509.ExtKeyUsageAny {
		t.Fatal("pkitest: Options.Usage is unset: name the extended key usage")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("pkitest: leaf key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{o.Usage},
		DNSNames:     o.DNS,
		IPAddresses:  o.IPs,
	}
	if tmpl.Subject.CommonName == "" {
		tmpl.Subject.CommonName = "leaf"
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = ca.notBefore
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = ca.notAfter
	}
	for _, u := range o.URIs {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatalf("pkitest: URI SAN %q: %v", u, err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("pkitest: leaf certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Client issues a client-auth certificate with the given URI SANs and no
// other SAN; with none it is a certificate without any SAN.
func (ca *CA) Client(t testing.TB, uris ...string) tls.Certificate {
	t.Helper()
	return ca.Issue(t, Options{URIs: uris, Usage: x509.ExtKeyUsageClientAuth})
}

// Pool returns a new pool holding only the CA's certificate, for a
// client's RootCAs or a server's ClientCAs. Each call makes its own pool,
// so a caller adding to it changes no one else's.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// WriteFiles writes the CA's certificate to dir/ca.crt and leaf's
// certificate and PKCS #8 key to dir/name.crt and dir/name.key (mode
// 0600), and returns the three paths.
func (ca *CA) WriteFiles(t testing.TB, dir, name string, leaf tls.Certificate) (caFile, certFile, keyFile string) {
	t.Helper()
	if len(leaf.Certificate) == 0 || leaf.PrivateKey == nil {
		t.Fatal("pkitest: WriteFiles: the leaf has no certificate or no key")
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatalf("pkitest: leaf key: %v", err)
	}
	write := func(file, typ string, der []byte) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatalf("pkitest: %v", err)
		}
		return path
	}
	return write("ca.crt", "CERTIFICATE", ca.der),
		write(name+".crt", "CERTIFICATE", leaf.Certificate[0]),
		write(name+".key", "PRIVATE KEY", keyDER)
}

// ServerFiles issues a server-auth certificate for 127.0.0.1 and writes
// it, its key and the CA into a new t.TempDir(), for a TLS listener on
// loopback. It returns the three paths.
func (ca *CA) ServerFiles(t testing.TB) (caFile, certFile, keyFile string) {
	t.Helper()
	srv := ca.Issue(t, Options{CommonName: "registrar", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: x509.ExtKeyUsageServerAuth})
	return ca.WriteFiles(t, t.TempDir(), "server", srv)
}
