package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

func TestListenUnixMakesDirectory0700AndSocket0600(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "run")
	path := filepath.Join(dir, "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	di, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); !di.IsDir() || got != 0o700 {
		t.Errorf("directory mode got %v, want drwx------", di.Mode())
	}
	si, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if si.Mode().Type() != fs.ModeSocket || si.Mode().Perm() != 0o600 {
		t.Errorf("socket mode got %v, want Srw-------", si.Mode())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close the socket file is still there (%v)", err)
	}
}

func TestListenUnixRefusesALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	first, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := server.ListenUnix(path)
	if err == nil {
		second.Close()
		t.Fatal("a second listener took over a live socket")
	}
	if !errors.Is(err, server.ErrSocketInUse) {
		t.Fatalf("got %v, want ErrSocketInUse", err)
	}
	// The first listener still answers.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket was disturbed: %v", err)
	}
	c.Close()
}

func TestListenUnixReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	// A crashed daemon leaves its socket file behind: nobody listens on it.
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("setup: no stale socket at %s (%v)", path, err)
	}
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatalf("got %v, want the stale socket replaced", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestListenUnixRefusesWhatIsNotASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := server.ListenUnix(path); !errors.Is(err, server.ErrNotSocket) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("got %v, want ErrNotSocket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Fatalf("the file was touched: %q, %v", b, err)
	}
}

func TestListenUnixRefusesAnUnsafeDirectory(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // umask-proof
		t.Fatal(err)
	}
	groupW := filepath.Join(base, "group")
	if err := os.Mkdir(groupW, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupW, 0o770); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir string }{
		{"world-writable", open},
		{"group-writable", groupW},
		{"symlink", link},
		{"not a directory", file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := server.ListenUnix(filepath.Join(tc.dir, "r.sock"))
			if err == nil {
				l.Close()
				t.Fatal("got a listener, want a refusal")
			}
			if !errors.Is(err, server.ErrUnsafeDir) {
				t.Fatalf("got %v, want ErrUnsafeDir", err)
			}
		})
	}
}

func TestListenUnixKeepsAnExistingSafeDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := server.ListenUnix(filepath.Join(dir, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Fatalf("an existing directory's mode changed to %v", fi.Mode())
	}
}

func TestListenUnixGroupSharesTheSocketWithTheGroupOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown to another group")
	}
	const gid = 61999 // any gid: chown as root needs no group entry
	g := server.SocketGroup{Name: "callers", GID: gid}
	base, err := os.MkdirTemp("", "wg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)

	// A missing directory is created 0750 in the group; the socket 0660.
	path := filepath.Join(base, "run", "r.sock")
	l, err := server.ListenUnixGroup(path, g)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o750, path: 0o660} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || fi.Sys().(*syscall.Stat_t).Gid != gid {
			t.Errorf("%s: mode %v group %d, want %v and %d", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
	l.Close()

	// An existing 0700 directory does not let the group in: refused.
	closed := filepath.Join(base, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := server.ListenUnixGroup(filepath.Join(closed, "r.sock"), g); !errors.Is(err, server.ErrSocketGroup) {
		t.Fatalf("socket in a 0700 directory with a group: %v, want ErrSocketGroup", err)
	}
	// Without a group nothing changes: 0600.
	l, err = server.ListenUnix(filepath.Join(closed, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, _ := os.Lstat(filepath.Join(closed, "r.sock")); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket without a group: mode %v, want 0600", fi.Mode().Perm())
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1, written to files.
type testPKI struct {
	*pkitest.CA
	caFile, certFile, keyFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{CA: pkitest.New(t)}
	p.caFile, p.certFile, p.keyFile = p.ServerFiles(t)
	return p
}

// identityRecordingTLSServer serves on a fresh mutual-TLS listener whose
// verbs store the caller identity of every deregister in seen, and returns
// the PKI, seen, the verbs, the server and the listener's address.
func identityRecordingTLSServer(t *testing.T) (pki *testPKI, seen *atomic.Value, v *fakeVerbs, s *server.Server, addr string) {
	t.Helper()
	pki = newTestPKI(t)
	seen = new(atomic.Value)
	v = &fakeVerbs{t: t, deregister: func(_ context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
		seen.Store(req.CallerIdentity)
		return registrar.DeregisterResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.Removed}, nil
	}}
	s = newServer(t, v, fixedHolder(t, 0, 0))
	l, err := server.ListenTLS("127.0.0.1:0", pki.certFile, pki.keyFile, pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, l)
	return pki, seen, v, s, l.Addr().String()
}

func TestMutualTLSIdentityComesFromTheClientCertificate(t *testing.T) {
	pki, seen, v, _, addr := identityRecordingTLSServer(t)

	for _, tc := range []struct {
		name       string
		uris, dns  []string
		want       string // "" for a RequestMalformed answer
		wantDetail string
	}{
		{name: "URI SAN", uris: []string{"spiffe://registrar.test/control-plane"}, want: "registrar-client:uri:spiffe://registrar.test/control-plane"},
		{name: "URI SAN first, DNS SAN ignored", uris: []string{"spiffe://registrar.test/a", "spiffe://registrar.test/b"}, dns: []string{"ctl.example"}, want: "registrar-client:uri:spiffe://registrar.test/a"},
		{name: "DNS SAN fallback", dns: []string{"ctl.example", "other.example"}, want: "registrar-client:dns:ctl.example"},
		{name: "no SAN", wantDetail: "no URI or DNS subject alternative name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen.Store("")
			before := v.calls.Load()
			cert := pki.Issue(t, pkitest.Options{CommonName: "client", URIs: tc.uris, DNS: tc.dns, Usage: x509.ExtKeyUsageClientAuth})
			c := wire.NewTLSClient(addr, &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{cert}})
			defer c.CloseIdleConnections()
			res, err := c.Deregister(context.Background(), wiretest.GoodDeregister())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed || !strings.Contains(res.Detail, tc.wantDetail) {
					t.Fatalf("got %d %s %q, want 400 RequestMalformed containing %q", res.StatusCode, res.ErrorID, res.Detail, tc.wantDetail)
				}
				if v.calls.Load() != before {
					t.Fatalf("a caller without an identity reached the verbs")
				}
				return
			}
			if !res.OK() {
				t.Fatalf("got %d %s %s, want a success", res.StatusCode, res.ErrorID, res.Detail)
			}
			if got, _ := seen.Load().(string); got != tc.want {
				t.Fatalf("caller identity got %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("no client certificate", func(t *testing.T) {
		before := v.calls.Load()
		c := wire.NewTLSClient(addr, &tls.Config{RootCAs: pki.Pool()})
		defer c.CloseIdleConnections()
		res, err := c.Deregister(context.Background(), wiretest.GoodDeregister())
		if err == nil {
			t.Fatalf("got %d %s, want the handshake to fail", res.StatusCode, res.ErrorID)
		}
		if !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("got %v, want the server's certificate-required alert", err)
		}
		if v.calls.Load() != before {
			t.Fatalf("a caller without a certificate reached the verbs")
		}
	})

	t.Run("certificate of another CA", func(t *testing.T) {
		cert := pkitest.New(t).Client(t, "spiffe://elsewhere/x")
		c := wire.NewTLSClient(addr, &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{cert}})
		defer c.CloseIdleConnections()
		res, err := c.Health(context.Background())
		if err == nil {
			t.Fatalf("got %d, want the handshake to fail", res.StatusCode)
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("got %v, want a certificate alert", err)
		}
	})
}

func TestListenTLSNamesTheFileAtFault(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name                string
		cert, key, clientCA string
		want                string
	}{
		{"missing certificate", missing, pki.keyFile, pki.caFile, missing},
		{"missing key", pki.certFile, missing, pki.caFile, missing},
		{"missing client CA", pki.certFile, pki.keyFile, missing, missing},
		{"certificate not PEM", garbage, pki.keyFile, pki.caFile, garbage},
		{"key not PEM", pki.certFile, garbage, pki.caFile, garbage},
		{"client CA not PEM", pki.certFile, pki.keyFile, garbage, "client CA file " + garbage},
		{"key of another certificate", pki.certFile, pki.caFile, pki.caFile, pki.certFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := server.ListenTLS("127.0.0.1:0", tc.cert, tc.key, tc.clientCA)
			if err == nil {
				l.Close()
				t.Fatal("got a listener, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestServerTLSConfigRequiresTLS13AndClientCertificates(t *testing.T) {
	pki := newTestPKI(t)
	cfg, err := server.ServerTLSConfig(pki.certFile, pki.keyFile, pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS13 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Fatalf("got min version %x, client auth %v, client CAs %v; want TLS 1.3, RequireAndVerifyClientCert, a pool", cfg.MinVersion, cfg.ClientAuth, cfg.ClientCAs)
	}
}

// The review's spoof, over real TLS: a certificate with DNS SAN
// attacker.example.net and a scheme-less URI SAN control-plane.example.net
// must not be the real control-plane.example.net; nor any URI SAN naming
// that host. Respellings of the real name are the real identity, and a SAN
// with control characters has none.
func TestASANSpoofingCertificateNeverGetsTheRealIdentity(t *testing.T) {
	pki, seen, _, s, addr := identityRecordingTLSServer(t)

	// identityOf is the identity the verbs saw for a certificate with
	// these SANs, or "" and the detail of its no_identity refusal.
	identityOf := func(t *testing.T, uris, dns []string) (id, detail string) {
		t.Helper()
		seen.Store("")
		before := s.Stats().Rejected[server.ListenerTLS][server.ReasonNoIdentity]
		cert := pki.Issue(t, pkitest.Options{URIs: uris, DNS: dns, Usage: x509.ExtKeyUsageClientAuth})
		c := wire.NewTLSClient(addr, &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{cert}})
		defer c.CloseIdleConnections()
		res, err := c.Deregister(context.Background(), wiretest.GoodDeregister())
		if err != nil {
			t.Fatal(err)
		}
		if res.OK() {
			got, _ := seen.Load().(string)
			return got, ""
		}
		if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed {
			t.Fatalf("got %d %s %q, want a success or 400 RequestMalformed", res.StatusCode, res.ErrorID, res.Detail)
		}
		if after := s.Stats().Rejected[server.ListenerTLS][server.ReasonNoIdentity]; after != before+1 {
			t.Fatalf("no_identity went from %d to %d, want one more", before, after)
		}
		if got, _ := seen.Load().(string); got != "" {
			t.Fatalf("a refused certificate reached the verbs as %q", got)
		}
		return "", res.Detail
	}

	// The spoofs are compared with what the real certificate got, and
	// that with its documented form.
	real, detail := identityOf(t, nil, []string{"control-plane.example.net"})
	if real == "" {
		t.Fatalf("the real certificate got no identity (%s)", detail)
	}
	if want := "registrar-client:dns:control-plane.example.net"; real != want {
		t.Errorf("the real certificate got %q, want %q", real, want)
	}
	t.Run("scheme-less URI SAN beside another DNS SAN", func(t *testing.T) {
		got, detail := identityOf(t, []string{"control-plane.example.net"}, []string{"attacker.example.net"})
		if got != "" || !strings.Contains(detail, "URI SAN has no scheme") {
			t.Fatalf("got %q, detail %q; want no identity because the URI SAN has no scheme", got, detail)
		}
	})
	for _, uri := range []string{"dns://control-plane.example.net", "spiffe://control-plane.example.net", "https://CONTROL-PLANE.example.net/"} {
		t.Run("URI SAN "+uri, func(t *testing.T) {
			got, detail := identityOf(t, []string{uri}, []string{"control-plane.example.net"})
			if got == "" || got == real || !strings.HasPrefix(got, "registrar-client:uri:") {
				t.Fatalf("got %q (%s), want a URI identity, not %q", got, detail, real)
			}
		})
	}
	t.Run("respellings of the real name are the real identity", func(t *testing.T) {
		for _, dns := range []string{"Control-Plane.Example.NET", "CONTROL-PLANE.EXAMPLE.NET", "control-plane.example.net."} {
			if got, detail := identityOf(t, nil, []string{dns}); got != real {
				t.Errorf("DNS SAN %q got %q (%s), want %q", dns, got, detail, real)
			}
		}
	})
	t.Run("query and fragment variants are refused", func(t *testing.T) {
		if got, detail := identityOf(t, []string{"spiffe://example.net/control-plane?x=1#frag"}, nil); got != "" || !strings.Contains(detail, "query") {
			t.Fatalf("got %q, detail %q; want no identity naming the query", got, detail)
		}
	})
	t.Run("a DNS SAN with a newline and ESC is refused", func(t *testing.T) {
		got, detail := identityOf(t, nil, []string{"control-plane.example.net\n\x1b[0m"})
		if got != "" || !strings.Contains(detail, "control character") {
			t.Fatalf("got %q, detail %q; want no identity naming the control character", got, detail)
		}
		if strings.ContainsAny(detail, "\n\x1b") {
			t.Fatalf("detail %q echoes the control characters", detail)
		}
	})
}
