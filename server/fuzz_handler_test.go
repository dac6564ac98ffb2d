package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/pipetest"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// fuzzConn is a connection whose peer sends in and then half-closes:
// reads drain in, then return io.EOF; writes are kept. It carries the
// identity the fuzzer chose for it.
type fuzzConn struct {
	in       *bytes.Reader
	mu       sync.Mutex
	out      bytes.Buffer
	identity connIdentity
	closed   chan struct{}
	once     sync.Once
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	return c.in.Read(p)
}

func (c *fuzzConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *fuzzConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *fuzzConn) LocalAddr() net.Addr              { return pipetest.Addr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return pipetest.Addr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzVerbs succeeds, and remembers whether it was reached without an
// identity.
type fuzzVerbs struct{ anonymous atomic.Int64 }

func (v *fuzzVerbs) Mint(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
	if req.CallerIdentity == "" {
		v.anonymous.Add(1)
	}
	return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint,
		Material: registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: time.Unix(0, 0)}}, nil
}

func (v *fuzzVerbs) Deregister(_ context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	if req.CallerIdentity == "" {
		v.anonymous.Add(1)
	}
	return registrar.DeregisterResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.Removed}, nil
}

// fuzzServer is one server for the whole fuzz run, serving fuzzConns
// queued on its pipe listener.
type fuzzServer struct {
	s        *Server
	l        *pipeListener
	verbs    *fuzzVerbs
	panicked atomic.Value // string
}

var theFuzzServer = sync.OnceValues(func() (*fuzzServer, error) {
	h, err := health.NewHolder()
	if err != nil {
		return nil, err
	}
	fs := &fuzzServer{verbs: &fuzzVerbs{}, l: newPipeListener()}
	fs.s, err = New(Options{Verbs: fs.verbs, Health: h})
	if err != nil {
		return nil, err
	}
	fs.s.identifyOther = func(c net.Conn) connIdentity { return c.(*fuzzConn).identity }
	inner := fs.s.srv.Handler
	fs.s.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					fs.panicked.Store(fmt.Sprint(v))
				}
				panic(v)
			}
		}()
		inner.ServeHTTP(w, r)
	})
	go fs.s.Serve(fs.l)
	return fs, nil
})

func fuzzRequest(method, path, ctype, body string, extra ...string) []byte {
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: registrar\r\n")
	if ctype != "" {
		b.WriteString("Content-Type: " + ctype + "\r\n")
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	if body != "" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return []byte(b.String())
}

const fuzzDeregisterBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review"}`

// FuzzHTTPHandler drives the whole server, HTTP parsing included, with
// arbitrary bytes on a connection whose identity the fuzzer picks. Never
// a panic; every answer is a well-formed HTTP response: a success, 400
// RequestMalformed with a bounded detail, or one of net/http's own plain
// refusals of what it cannot parse; a connection without an identity
// never reaches the verbs.
func FuzzHTTPHandler(f *testing.F) {
	f.Add(fuzzRequest("POST", wire.PathMint, "application/json", mintBodyForPipes), uint8(0))
	f.Add(fuzzRequest("POST", wire.PathDeregister, "application/json", fuzzDeregisterBody), uint8(0))
	f.Add(fuzzRequest("GET", wire.PathHealth, "", ""), uint8(1))
	f.Add(fuzzRequest("POST", wire.PathMint, "application/json", mintBodyForPipes), uint8(1))
	f.Add(fuzzRequest("PUT", wire.PathMint, "application/json", mintBodyForPipes), uint8(0))
	f.Add(fuzzRequest("POST", "/v2/mint?x=1", "text/plain", "{}"), uint8(0))
	f.Add(fuzzRequest("POST", wire.PathMint, "application/json; charset=latin1", mintBodyForPipes), uint8(0))
	f.Add(fuzzRequest("POST", wire.PathMint, "application/json", `{"protocol_version":1,"spec":{"reload":"`+strings.Repeat("x", 1100)+`"}}`), uint8(0))
	f.Add([]byte("POST /v1/mint HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n0\r\n\r\n"), uint8(0))
	f.Add([]byte("POST /v1/mint HTTP/1.1\r\nHost: r\r\nContent-Length: 99999999\r\nContent-Type: application/json\r\n\r\n{}"), uint8(0))
	f.Add(append(fuzzRequest("GET", wire.PathHealth, "", ""), fuzzRequest("POST", wire.PathDeregister, "application/json", fuzzDeregisterBody)...), uint8(0))
	f.Add([]byte("GET /v1/health HTTP/1.0\r\n\r\n"), uint8(2))
	f.Add([]byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"), uint8(0))
	f.Add([]byte("GET /v1/health HTTP/1.1\r\nHost: r\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n"), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, who uint8) {
		fs, err := theFuzzServer()
		if err != nil {
			t.Fatal(err)
		}
		c := &fuzzConn{in: bytes.NewReader(raw), closed: make(chan struct{})}
		anonymous := who%3 == 1
		switch {
		case anonymous:
			c.identity = connIdentity{problem: "fuzz: no identity"}
		case who%3 == 2:
			c.identity = connIdentity{id: "registrar-client:spiffe://fuzz/" + strconv.Itoa(int(who))}
		default:
			c.identity = connIdentity{id: UnixIdentity(uint32(who))}
		}
		before := fs.verbs.anonymous.Load()
		fs.l.Queue(c)
		select {
		case <-c.closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("the server never closed a connection whose peer had finished sending")
		}
		if p, ok := fs.panicked.Load().(string); ok {
			t.Fatalf("handler panicked: %s", p)
		}
		if fs.verbs.anonymous.Load() != before {
			t.Fatalf("a request without an identity reached the verbs")
		}
		c.mu.Lock()
		out := append([]byte(nil), c.out.Bytes()...)
		c.mu.Unlock()
		checkAnswers(t, out, anonymous)
	})
}

// checkAnswers reads every response the server wrote.
func checkAnswers(t *testing.T, out []byte, anonymous bool) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(out))
	for n := 0; ; n++ {
		if _, err := br.Peek(1); err == io.EOF {
			return
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d is not an HTTP response: %v\n%q", n, err, out)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("answer %d: body: %v", n, err)
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			// net/http's own refusal of what it could not parse.
			switch res.StatusCode {
			case 400, 413, 417, 431, 501, 505:
			default:
				t.Fatalf("answer %d: plain status %d, want one of net/http's refusals:\n%q", n, res.StatusCode, out)
			}
			continue
		}
		var r struct {
			ProtocolVersion int             `json:"protocol_version"`
			Error           *wire.ErrorBody `json:"error"`
			Health          json.RawMessage `json:"registrar_health"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.ProtocolVersion != 1 || len(r.Health) == 0 {
			t.Fatalf("answer %d: not a protocol answer (%v): %s", n, err, body)
		}
		switch res.StatusCode {
		case 200:
			if r.Error != nil {
				t.Fatalf("answer %d: 200 with an error: %s", n, body)
			}
		case 400:
			if r.Error == nil || r.Error.ID != wire.RequestMalformed || r.Error.Detail == "" || len(r.Error.Detail) > wire.MaxDetailBytes {
				t.Fatalf("answer %d: 400 that is not a bounded RequestMalformed: %s", n, body)
			}
		default:
			t.Fatalf("answer %d: status %d: %s", n, res.StatusCode, body)
		}
		if anonymous && res.StatusCode == 200 && r.Error == nil && !bytes.Contains(body, []byte(`"registrar_health"`)) {
			t.Fatalf("answer %d: an anonymous caller got a verb's success: %s", n, body)
		}
	}
}

// fuzzLeafDER is a client certificate with the given SANs, for the seeds.
func fuzzLeafDER(f *testing.F, ca *pkitest.CA, uris, dns []string) []byte {
	f.Helper()
	return ca.Issue(f, pkitest.Options{URIs: uris, DNS: dns, Usage: x509.ExtKeyUsageClientAuth}).Certificate[0]
}

// FuzzCertificateIdentity: the identity a verified certificate yields.
// Either an identity or a problem, never both, never a panic; the identity
// is typed by its SAN (the first URI SAN, else the first DNS SAN),
// canonical, free of control characters and at most MaxIdentityBytes long.
func FuzzCertificateIdentity(f *testing.F) {
	ca := pkitest.New(f)
	f.Add(fuzzLeafDER(f, ca, []string{"spiffe://registrar.test/ctl"}, []string{"ctl.example"}), "", "", false)
	f.Add(fuzzLeafDER(f, ca, nil, []string{"ctl.example", "b.example"}), "", "", false)
	f.Add(fuzzLeafDER(f, ca, nil, nil), "", "", false)
	f.Add([]byte{}, "spiffe://x/y", "", false)
	f.Add([]byte{}, "", "only.dns", false)
	f.Add([]byte{}, "", "", true)
	f.Add([]byte{0x30, 0x82}, "::not a url", strings.Repeat("a", 600), false)
	f.Fuzz(func(t *testing.T, der []byte, uri, dns string, noChain bool) {
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			leaf = &x509.Certificate{}
			if uri != "" {
				if u, err := url.Parse(uri); err == nil {
					leaf.URIs = append(leaf.URIs, u)
				} else {
					leaf.URIs = append(leaf.URIs, nil)
				}
			}
			if dns != "" {
				leaf.DNSNames = strings.Split(dns, ",")
			}
		}
		cs := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
		if noChain {
			cs.VerifiedChains = nil
		}
		id, problem := tlsIdentity(cs)
		if (id == "") == (problem == "") {
			t.Fatalf("got identity %q and problem %q, want exactly one", id, problem)
		}
		if noChain {
			if id != "" {
				t.Fatalf("an unverified connection got identity %q", id)
			}
			return
		}
		if id == "" {
			return
		}
		if len(id) > wire.MaxIdentityBytes || hasControl(id) {
			t.Fatalf("identity %q: want at most %d bytes and no control character", id, wire.MaxIdentityBytes)
		}
		// Typed by the SAN it came from: the first URI SAN if there is
		// one, else the first DNS SAN.
		switch {
		case len(leaf.URIs) > 0:
			canon, ok := strings.CutPrefix(id, uriIdentityPrefix)
			if !ok {
				t.Fatalf("identity %q of a certificate with a URI SAN, want %s…", id, uriIdentityPrefix)
			}
			// Canonical: the identity's URI, parsed again, is itself.
			u, err := url.Parse(canon)
			if err != nil {
				t.Fatalf("identity %q: its URI does not parse: %v", id, err)
			}
			if again, problem := canonicalURI(u); again != canon {
				t.Fatalf("identity %q: canonical form of its URI is %q (%s)", id, again, problem)
			}
			if host := u.Hostname(); host != strings.ToLower(host) {
				t.Fatalf("identity %q: host not lower-case", id)
			}
		default:
			name, ok := strings.CutPrefix(id, dnsIdentityPrefix)
			if !ok {
				t.Fatalf("identity %q of a certificate with only DNS SANs, want %s…", id, dnsIdentityPrefix)
			}
			if name != strings.ToLower(strings.TrimSuffix(leaf.DNSNames[0], ".")) {
				t.Fatalf("identity %q, want the first DNS SAN %q lower-cased", id, leaf.DNSNames[0])
			}
		}
	})
}
