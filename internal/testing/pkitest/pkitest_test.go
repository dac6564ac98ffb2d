package pkitest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
)

func leaf(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	cert, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func verify(c *x509.Certificate, pool *x509.CertPool, usage x509.ExtKeyUsage, at time.Time) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: at})
	return err
}

func TestIssuedCertificatesVerifyOnlyForTheirCAUsageAndTime(t *testing.T) {
	ca := pkitest.New(t)
	now := time.Now()
	client := leaf(t, ca.Client(t, "spiffe://registrar.test/a", "spiffe://registrar.test/b"))
	if err := verify(client, ca.Pool(), x509.ExtKeyUsageClientAuth, now); err != nil {
		t.Fatalf("a client certificate does not verify as a client: %v", err)
	}
	if got := []string{client.URIs[0].String(), client.URIs[1].String()}; !slices.Equal(got, []string{"spiffe://registrar.test/a", "spiffe://registrar.test/b"}) || len(client.DNSNames) != 0 || len(client.IPAddresses) != 0 {
		t.Fatalf("client SANs got URIs %v DNS %v IPs %v, want the two URIs only", client.URIs, client.DNSNames, client.IPAddresses)
	}
	if err := verify(client, ca.Pool(), x509.ExtKeyUsageServerAuth, now); err == nil {
		t.Fatal("a client certificate verified as a server")
	}
	if err := verify(client, pkitest.New(t).Pool(), x509.ExtKeyUsageClientAuth, now); err == nil {
		t.Fatal("a certificate verified against another CA")
	}

	noSAN := leaf(t, ca.Client(t))
	if len(noSAN.URIs)+len(noSAN.DNSNames)+len(noSAN.IPAddresses) != 0 || noSAN.Subject.CommonName == "" {
		t.Fatalf("Client() got URIs %v DNS %v IPs %v CN %q, want no SAN and a CN", noSAN.URIs, noSAN.DNSNames, noSAN.IPAddresses, noSAN.Subject.CommonName)
	}

	expired := leaf(t, ca.Issue(t, pkitest.Options{DNS: []string{"x.example"}, Usage: x509.ExtKeyUsageServerAuth,
		NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Minute)}))
	if err := verify(expired, ca.Pool(), x509.ExtKeyUsageServerAuth, now); err == nil {
		t.Fatal("an expired certificate verified")
	}
	if !expired.NotAfter.Equal(now.Add(-time.Minute).Truncate(time.Second)) {
		t.Errorf("NotAfter got %v, want %v", expired.NotAfter, now.Add(-time.Minute))
	}
}

func TestWrittenFilesLoadAsAKeyPairAndAPool(t *testing.T) {
	ca := pkitest.New(t)
	caFile, certFile, keyFile := ca.ServerFiles(t)
	if filepath.Dir(caFile) != filepath.Dir(certFile) || filepath.Base(certFile) != "server.crt" || filepath.Base(keyFile) != "server.key" || filepath.Base(caFile) != "ca.crt" {
		t.Fatalf("files %s %s %s, want ca.crt, server.crt, server.key in one directory", caFile, certFile, keyFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the CA file holds no certificate")
	}
	srv := leaf(t, pair)
	if err := verify(srv, pool, x509.ExtKeyUsageServerAuth, time.Now()); err != nil {
		t.Fatalf("the written server certificate does not verify against the written CA: %v", err)
	}
	if err := srv.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{caFile, certFile, keyFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode(), err)
		}
	}
	if err := srv.VerifyHostname(net.IPv6loopback.String()); err == nil {
		t.Error("the server certificate names ::1 too, want 127.0.0.1 only")
	}
}

func TestConcurrentIssuesGetDistinctSerials(t *testing.T) {
	ca := pkitest.New(t)
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			s := leaf(t, ca.Client(t, "spiffe://registrar.test/x")).SerialNumber.String()
			mu.Lock()
			defer mu.Unlock()
			if seen[s] || s == "1" {
				t.Errorf("serial %s given twice (1 is the CA's)", s)
			}
			seen[s] = true
		})
	}
	wg.Wait()
}

// fatalTB records a Fatal and stops the goroutine the way testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = "fatal"
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) { f.Fatal() }

func TestAnUnsetUsageFailsTheTestInsteadOfAllowingAnyUse(t *testing.T) {
	ca := pkitest.New(t)
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ca.Issue(tb, pkitest.Options{URIs: []string{"spiffe://registrar.test/x"}})
		tb.msg = "returned"
	}()
	<-done
	if tb.msg != "fatal" {
		t.Fatalf("Issue with no Usage: %s, want a Fatal", tb.msg)
	}
}
