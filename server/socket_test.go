package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// TestPreDerivationFloodOverTheSocketKeepsItsRealRefusal: the real verbs
// behind the real socket. A flood of requests that fail a pre-derivation
// check is answered, every time, with its real permanent identifier, never
// RegistrarBusy; past the predecision_refusal burst nothing is recorded.
func TestPreDerivationFloodOverTheSocketKeepsItsRealRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*wire.MintRequest)
		want wire.ErrorID
	}{
		{"non-DNS-label service name", func(r *wire.MintRequest) { r.ServiceName, r.Spec.ServiceName = "Not_A_Label", "Not_A_Label" }, wire.ServiceLabelInvalid},
		{"unconfigured component", func(r *wire.MintRequest) { r.Component, r.Spec.Component = "unconfigured", "unconfigured" }, wire.ServiceInstanceMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const burst, flood = 3, 40
			rv := newRealVerbs(t, burst, 512, registrartest.FailingBackend{T: t}, &audittest.AuditLog{})
			s := newServer(t, rv.v, fixedHolder(t, 0, 0))
			c := wire.NewUnixClient(serveUnix(t, s))
			defer c.CloseIdleConnections()
			req := goodMint()
			tc.mut(&req)
			for i := range flood {
				res, err := c.Mint(context.Background(), req)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if res.ErrorID != tc.want || res.Class != wire.Permanent || res.StatusCode != tc.want.HTTPStatus() {
					t.Fatalf("call %d: got %d %s (%s), want %d %s permanent", i, res.StatusCode, res.ErrorID, res.Class, tc.want.HTTPStatus(), tc.want)
				}
				if res.RetryAfterHeader != "" || res.RetryAfter != 0 {
					t.Fatalf("call %d: a permanent refusal advertised a retry-after (%q, %d)", i, res.RetryAfterHeader, res.RetryAfter)
				}
				if res.RequestID == "" || res.RegistrationID != "" {
					t.Fatalf("call %d: request_id %q registration_id %q, want an id and no registration", i, res.RequestID, res.RegistrationID)
				}
				if i == burst-1 {
					if got := rv.log.Len(); got != 2*burst {
						t.Fatalf("%d records within the burst, want %d", got, 2*burst)
					}
				}
			}
			if got := rv.log.Len(); got != 2*burst {
				t.Fatalf("%d records after the flood, want %d (intent and outcome for the burst only)", got, 2*burst)
			}
			if got := rv.counts.Count(vocab.PredecisionRefusal); got != flood-burst {
				t.Errorf("limited predecision_refusal got %d, want %d", got, flood-burst)
			}
			if got := rv.counts.Count(vocab.Admission); got != 0 {
				t.Errorf("limited admission got %d, want 0", got)
			}
		})
	}
}

func TestThrottleOverTheSocket(t *testing.T) {
	const burst = 2
	backend := registrartest.NewBackend(nil)
	rv := newRealVerbs(t, 32, burst, backend, &audittest.AuditLog{})
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	ctx := context.Background()

	for i, want := range []string{"first_mint", "idempotent_remint"} {
		res, err := c.Mint(ctx, goodMint())
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() || res.Outcome != want || res.RegistrationID != "h1-review-007" || res.Material == nil {
			t.Fatalf("mint %d: got %d %+v, want %s", i, res.StatusCode, res, want)
		}
		if _, err := res.Material.ExpiresAtTime(); err != nil {
			t.Fatalf("mint %d: expires_at: %v", i, err)
		}
	}
	records, calls := rv.log.Len(), backend.Calls()

	res, err := c.Mint(ctx, goodMint())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 429 || res.ErrorID != wire.RegistrarBusy || res.Class != wire.Retryable || !res.Retryable() {
		t.Fatalf("got %d %s %s, want 429 RegistrarBusy retryable", res.StatusCode, res.ErrorID, res.Class)
	}
	if res.RetryAfter < 1 {
		t.Errorf("retry_after got %d, want ≥ 1", res.RetryAfter)
	}
	if got, want := res.RetryAfterHeader, strconv.FormatUint(res.RetryAfter, 10); got != want {
		t.Errorf("Retry-After header got %q, want the payload's %q", got, want)
	}
	if got := backend.Calls(); got != calls {
		t.Errorf("backend calls got %d, want %d: the throttle reached the backend", got, calls)
	}
	if got := rv.log.Len(); got != records {
		t.Errorf("records got %d, want %d: the throttle wrote a record", got, records)
	}
	if got := rv.counts.Count(vocab.Admission); got != 1 {
		t.Errorf("limited admission got %d, want 1", got)
	}
}

// countingListener counts accepted connections and hands them on as they
// are (the server needs the *net.UnixConn).
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestTwoConnectionsOfOneCallerSpendOneBucket: the identity is the uid, not
// anything per connection, so reconnecting does not buy a fresh bucket.
func TestTwoConnectionsOfOneCallerSpendOneBucket(t *testing.T) {
	rv := newRealVerbs(t, 32, 1, registrartest.NewBackend(nil), &audittest.AuditLog{})
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	path := filepath.Join(t.TempDir(), "run", "r.sock")
	ul, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: ul}
	serveOn(t, s, l)
	ctx := context.Background()

	first := wire.NewUnixClient(path, wire.WithoutKeepAlive())
	res, err := first.Mint(ctx, goodMint())
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Outcome != "first_mint" {
		t.Fatalf("first connection: got %d %s %s, want first_mint", res.StatusCode, res.ErrorID, res.Outcome)
	}
	second := wire.NewUnixClient(path, wire.WithoutKeepAlive())
	res, err = second.Mint(ctx, goodMint())
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 429 || res.ErrorID != wire.RegistrarBusy {
		t.Fatalf("second connection: got %d %s, want 429 RegistrarBusy", res.StatusCode, res.ErrorID)
	}
	if got := l.accepted.Load(); got != 2 {
		t.Fatalf("the server accepted %d connections, want 2", got)
	}
}

func TestUnixCallerIsIdentifiedByItsUID(t *testing.T) {
	var mintID, deregID atomic.Value
	v := &fakeVerbs{t: t,
		mint: func(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
			mintID.Store(req.CallerIdentity)
			return registrar.MintResult{RequestID: "r.1", RegistrationID: "x", Outcome: registrar.FirstMint}, nil
		},
		deregister: func(_ context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
			deregID.Store(req.CallerIdentity)
			return registrar.DeregisterResult{RequestID: "r.2", RegistrationID: "x", Outcome: registrar.Removed}, nil
		},
	}
	s := newServer(t, v, fixedHolder(t, 0, 0))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	if _, err := c.Mint(context.Background(), goodMint()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deregister(context.Background(), goodDeregister()); err != nil {
		t.Fatal(err)
	}
	want := "unix-peer:uid=" + strconv.Itoa(os.Getuid())
	if got, _ := mintID.Load().(string); got != want {
		t.Errorf("mint caller identity got %q, want %q", got, want)
	}
	if got, _ := deregID.Load().(string); got != want {
		t.Errorf("deregister caller identity got %q, want %q", got, want)
	}
	if got := server.UnixIdentity(uint32(os.Getuid())); got != want {
		t.Errorf("UnixIdentity got %q, want %q", got, want)
	}
}

// TestRequestFieldsReachTheVerbs: the decoded request is what the verbs
// get, with the connection's identity.
func TestRequestFieldsReachTheVerbs(t *testing.T) {
	var got registrar.MintRequest
	v := &fakeVerbs{t: t, mint: func(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
		got = req
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "x", Outcome: registrar.FirstMint}, nil
	}}
	s := newServer(t, v, fixedHolder(t, 0, 0))
	rec := do(s, "POST", wire.PathMint, mintBody, nil)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := registrar.MintRequest{
		CallerIdentity: testIdentity, ServiceName: "review", Host: "h1", Instance: 7, Component: "review",
		Spec:           registrar.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTLSeconds: 300, IdempotencyKey: "k1",
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestMalformedRequestsAreNeitherChargedNorRecorded: with an admission
// burst of one, a run of malformed requests leaves the token in place for
// the next well-formed mint, and writes nothing.
func TestMalformedRequestsAreNeitherChargedNorRecorded(t *testing.T) {
	rv := newRealVerbs(t, 1, 1, registrartest.NewBackend(nil), &audittest.AuditLog{})
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	ctx := context.Background()
	bad := goodMint()
	bad.ProtocolVersion = 2
	for i := range 10 {
		res, err := c.Mint(ctx, bad)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed {
			t.Fatalf("call %d: got %d %s, want 400 RequestMalformed", i, res.StatusCode, res.ErrorID)
		}
	}
	if got := rv.log.Len(); got != 0 {
		t.Fatalf("%d records after malformed requests, want 0", got)
	}
	res, err := c.Mint(ctx, goodMint())
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Outcome != "first_mint" {
		t.Fatalf("got %d %s, want first_mint: a malformed request spent the token", res.StatusCode, res.ErrorID)
	}
	if pr, adm := rv.counts.Count(vocab.PredecisionRefusal), rv.counts.Count(vocab.Admission); pr != 0 || adm != 0 {
		t.Fatalf("limited counts got %d/%d, want 0/0", pr, adm)
	}
}

// TestConnectionCapGivesTokensBack: with a cap of one, connection after
// connection is served: each closing connection gives its token back.
func TestConnectionCapGivesTokensBack(t *testing.T) {
	s, err := server.New(server.Options{Verbs: unreachableVerbs(t), Health: fixedHolder(t, 0, 0), UnixMaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The timeout only bounds a failure (a token never given back).
	c := wire.NewUnixClient(serveUnix(t, s), wire.WithoutKeepAlive(), wire.WithTimeout(30*time.Second))
	for i := range 5 {
		res, err := c.Health(context.Background())
		if err != nil || !res.OK() {
			t.Fatalf("connection %d: got %+v, %v, want a health answer", i, res, err)
		}
		// The client has its answer an instant before the server marks the
		// connection free; at a cap of one a newcomer in that instant is
		// refused (every slot busy), which is the rule, not a leak. Wait
		// for the slot to come back: a token never given back fails here.
		deadline := time.Now().Add(10 * time.Second)
		for s.Stats().Connections[server.ListenerUnix] != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("connection %d: its slot was never given back", i)
			}
			runtime.Gosched()
		}
	}
}
