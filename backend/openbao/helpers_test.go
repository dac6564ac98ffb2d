package openbao_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/vocab"

	"github.com/openbao/openbao/api/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

const testPrefix = "registrar-otel-test"

// testServices are the services the tests mint for: newEnv writes their
// policies as the operator does.
var testServices = []string{"review", "billing", "edge-proxy"}

// documentedPolicy is the token policy the documentation shows, for the
// tests' mounts, prefix and secret id settings (1 h, 1 use).
var documentedPolicy = openbao.TokenPolicy("secret", testPrefix, "approle", time.Hour, 1)

// testMaxInFlight is the bulkhead of the tests that are not about it: the
// concurrency tests send up to 64 calls at once under the race detector,
// and a slot wait there would test the machine, not the backend.
const testMaxInFlight = 1024

// action is what the proxy does with one request.
type action uint8

const (
	forward      action = iota
	fail503             // answer 503 without forwarding: the server never sees it
	fail500             // answer 500 (the server's internal error) without forwarding
	forwardDrop         // forward, let the server apply it, then drop the client's connection
	forwardAfter        // hold the request until the hook's release channel closes, then forward
)

// proxy is a loopback reverse proxy in front of the server: it counts every
// request and can fail, drop or hold any of them.
type proxy struct {
	URL string

	t       testing.TB
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	seen    []string // "METHOD /path" of every request, in order
	hook    func(n int, r *http.Request) (action, <-chan struct{})
	holding chan string // receives "METHOD /path" when a request is being held
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, rp: httputil.NewSingleHostReverseProxy(u), holding: make(chan string, 64)}
	// A dead upstream looks like a dead server: the connection is dropped
	// rather than answered 502.
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { drop(w) }
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	n := len(p.seen)
	p.seen = append(p.seen, r.Method+" "+r.URL.Path)
	hook := p.hook
	p.mu.Unlock()
	act, release := forward, (<-chan struct{})(nil)
	if hook != nil {
		act, release = hook(n, r)
	}
	switch act {
	case fail503, fail500:
		code := http.StatusServiceUnavailable
		if act == fail500 {
			code = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(`{"errors":["injected by the test proxy"]}`))
	case forwardDrop:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		drop(w)
	case forwardAfter:
		p.holding <- r.Method + " " + r.URL.Path
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		p.rp.ServeHTTP(w, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// count returns how many requests the proxy has seen.
func (p *proxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

func (p *proxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

func (p *proxy) setHook(h func(n int, r *http.Request) (action, <-chan struct{})) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// failNth fails the proxy's n-th request from now (0-based) with act, once.
func (p *proxy) failNth(n int, act action) {
	p.mu.Lock()
	base := len(p.seen)
	p.mu.Unlock()
	p.setHook(func(i int, _ *http.Request) (action, <-chan struct{}) {
		if i == base+n {
			return act, nil
		}
		return forward, nil
	})
}

// logBuffer is the shared test log destination.
type logBuffer = logtest.Buffer

// env is one server, optionally behind a proxy, and a backend talking to
// it.
type env struct {
	srv     *vaulttest.Server
	px      *proxy
	b       *openbao.Backend
	root    *api.Client
	logs    *logBuffer
	token   string
	timeout time.Duration
	// restarts counts the backends restarted made (the same goroutine
	// only).
	restarts int
}

// restarted returns a new backend on the same server, as a restarted
// daemon would open: it shares nothing in memory with e.b. Its clock runs
// one claim lifetime ahead of the previous restart's, as if the restart
// took that long: a claim the failed call left (another registrar's, to
// the new backend) has expired.
func (e *env) restarted(t *testing.T) *openbao.Backend {
	t.Helper()
	b, err := openbao.New(openbao.Options{Address: e.px.URL, Token: e.token, KVPrefix: testPrefix, RequestTimeout: e.timeout,
		SecretIDTTL: time.Hour, SecretIDNumUses: 1, MaxInFlight: testMaxInFlight, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.restarts++
	ahead := time.Duration(e.restarts) * openbao.ClaimTTL(b)
	openbao.SetClaimHooks(b, func() time.Time { return time.Now().Add(ahead) }, nil, nil)
	t.Cleanup(func() { b.Close() })
	return b
}

type envOptions struct {
	persistent bool
	timeout    time.Duration
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	// tokenPolicy, when set, gives the backend a token holding only this
	// policy instead of the root token.
	tokenPolicy string
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	var srv *vaulttest.Server
	if o.persistent {
		srv = vaulttest.StartPersistent(t)
	} else {
		srv = vaulttest.StartDev(t)
	}
	px := newProxy(t, srv.Addr)
	logs := &logBuffer{}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	token := srv.RootToken
	// The operator's one-time provisioning: a policy per service.
	for _, svc := range testServices {
		if err := srv.Client().Sys().PutPolicy(openbao.ServicePolicyName(svc), openbao.ServicePolicy("secret", testPrefix, svc)); err != nil {
			t.Fatal(err)
		}
	}
	if o.tokenPolicy != "" {
		root := srv.Client()
		if err := root.Sys().PutPolicy("registrar-otel", o.tokenPolicy); err != nil {
			t.Fatal(err)
		}
		sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"registrar-otel"}, NoDefaultPolicy: true})
		if err != nil {
			t.Fatal(err)
		}
		token = sec.Auth.ClientToken
	}
	obs, err := telemetry.NewOpenBaoObserver(o.mp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openbao.New(openbao.Options{
		Address:         px.URL,
		Token:           token,
		KVPrefix:        testPrefix,
		RequestTimeout:  timeout,
		SecretIDTTL:     time.Hour,
		SecretIDNumUses: 1,
		MaxInFlight:     testMaxInFlight,
		Logger:          slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider:  o.tp,
		Observer:        obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e := &env{srv: srv, px: px, b: b, root: srv.Client(), logs: logs, token: token, timeout: timeout}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), e.token) {
			t.Errorf("the backend's log contains the token:\n%s", logs.String())
		}
	})
	return e
}

var testNow = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func mintOp(id, host, svc string) registrar.MintOp {
	return registrar.MintOp{
		RegistrationID: id,
		Host:           host,
		Spec:           registrar.Spec{Component: "review", ServiceName: svc, Reload: "systemctl reload " + svc},
		WrapTTL:        300 * time.Second,
		Now:            testNow,
	}
}

// state is what the server holds for one registration id, read with the
// root token.
type state struct {
	binding map[string]any // nil when absent
	version int
	policy  string // the policy the role carries ("" without a role)
	role    map[string]any
	roleID  string
}

func (e *env) state(t *testing.T, id string) state {
	t.Helper()
	ctx := context.Background()
	var s state
	kv, err := e.root.KVv2("secret").Get(ctx, path.Join(testPrefix, "bindings", id))
	switch {
	case errors.Is(err, api.ErrSecretNotFound):
	case err != nil:
		t.Fatalf("reading the binding of %s: %v", id, err)
	default:
		s.binding, s.version = kv.Data, kv.VersionMetadata.Version
	}
	if legacy, err := e.root.Sys().GetPolicyWithContext(ctx, openbao.RoleName(id)); err != nil || legacy != "" {
		t.Fatalf("the server holds a policy %s (%v): the backend writes no policy", openbao.RoleName(id), err)
	}
	role, err := e.root.Logical().ReadWithContext(ctx, "auth/approle/role/"+openbao.RoleName(id))
	if err != nil {
		t.Fatalf("reading the role of %s: %v", id, err)
	}
	if role != nil {
		s.role = role.Data
		if pols, _ := role.Data["token_policies"].([]any); len(pols) == 1 {
			s.policy, _ = pols[0].(string)
		}
		rid, err := e.root.Logical().ReadWithContext(ctx, "auth/approle/role/"+openbao.RoleName(id)+"/role-id")
		if err != nil {
			t.Fatalf("reading the role id of %s: %v", id, err)
		}
		s.roleID, _ = rid.Data["role_id"].(string)
	}
	return s
}

// inventory lists the server's bootroot-service-* roles, the bindings
// under the test prefix, and any bootroot-service-* policy (the backend
// writes none since it attaches the operator's per-service policies, so
// policies must stay empty).
type inventory struct {
	policies, roles, bindings []string // registration ids
}

func (e *env) inventory(t *testing.T) inventory {
	t.Helper()
	ctx := context.Background()
	var inv inventory
	pols, err := e.root.Sys().ListPoliciesWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pols {
		if id, ok := strings.CutPrefix(p, openbao.RolePrefix); ok {
			inv.policies = append(inv.policies, id)
		}
	}
	inv.roles = listIDs(t, e.root, "auth/approle/role", openbao.RolePrefix)
	inv.bindings = listIDs(t, e.root, "secret/metadata/"+testPrefix+"/bindings", "")
	slices.Sort(inv.policies)
	slices.Sort(inv.roles)
	slices.Sort(inv.bindings)
	return inv
}

func listIDs(t *testing.T, c *api.Client, p, prefix string) []string {
	t.Helper()
	s, err := c.Logical().ListWithContext(context.Background(), p)
	if err != nil {
		t.Fatalf("LIST %s: %v", p, err)
	}
	var out []string
	if s == nil {
		return nil
	}
	keys, _ := s.Data["keys"].([]any)
	for _, k := range keys {
		if id, ok := strings.CutPrefix(k.(string), prefix); ok {
			out = append(out, id)
		}
	}
	return out
}

// verbsHarness is the real verbs over the backend, with an in-memory audit
// log and a limiter whose clock stands still.
type verbsHarness struct {
	v   *registrar.Verbs
	lim *limiter.Limiter
	log *audittest.AuditLog
}

var testComponents = map[string]vocab.Multiplicity{"review": vocab.ManyPerHost, "edge-proxy": vocab.OnePerHost}

func newVerbs(t *testing.T, b registrar.Backend, admissionBurst uint32, tp trace.TracerProvider) *verbsHarness {
	t.Helper()
	return newVerbsDeps(t, admissionBurst, registrar.Deps{Backend: b, TracerProvider: tp})
}

// newVerbsDeps is newVerbs with deps (the backend and any tracer provider
// or observer) completed by a fresh limiter, an in-memory audit log and
// the fixed clock.
func newVerbsDeps(t *testing.T, admissionBurst uint32, deps registrar.Deps) *verbsHarness {
	t.Helper()
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: admissionBurst, RefillInterval: time.Second},
		Now:                func() limiter.Instant { return 0 },
	}, counting.New())
	if err != nil {
		t.Fatal(err)
	}
	log := &audittest.AuditLog{}
	deps.Limiter, deps.Audit, deps.Now = lim, log, func() time.Time { return testNow }
	v, err := registrar.New(registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 1800}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &verbsHarness{v: v, lim: lim, log: log}
}

func mintRequest(host string, instance uint32) registrar.MintRequest {
	return registrar.MintRequest{
		CallerIdentity: "unix-peer:uid=1000",
		ServiceName:    "review",
		Host:           host,
		Instance:       instance,
		Component:      "review",
		Spec:           registrar.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTLSeconds: 300,
	}
}

func newTestBackend(t *testing.T) *openbao.Backend {
	t.Helper()
	b, err := openbao.New(openbao.Options{Address: "https://openbao.internal:8200", Token: "t", KVMount: "kv", KVPrefix: "bootroot/registrar"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
