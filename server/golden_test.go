package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in "+goldenDir)

// goldenDir holds the protocol's golden fixtures: they spell the wire
// package's payloads (docs/en/wire.md quotes them), and the server is what
// answers them.
const goldenDir = "../wire/testdata"

// checkGolden compares got with goldenDir/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (rerun with -update and review the diff)\ngot:  %s\nwant: %s", path, got, want)
	}
}

const testIdentity = "unix-peer:uid=1000"

// do sends one request through the server's handler with a known
// identity.
func do(s *server.Server, method, path, body string, hdr http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req = req.WithContext(server.WithIdentity(req.Context(), testIdentity))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// The fixed answers of the golden fixtures.
var (
	goldenExpiry   = time.Date(2026, 12, 1, 21, 5, 0, 123456789, time.FixedZone("KST", 9*3600)) // → 12:05:00.123Z
	goldenMaterial = registrar.Material{RoleID: "role-h1-review-007", WrappedSecretID: "wsid-0123456789abcdef", ExpiresAt: goldenExpiry}
)

func mintAnswer(res registrar.MintResult, err error) func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
	return func(context.Context, registrar.MintRequest) (registrar.MintResult, error) { return res, err }
}

func deregisterAnswer(res registrar.DeregisterResult, err error) func(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return func(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
		return res, err
	}
}

type responseCase struct {
	name       string
	method     string
	path       string
	body       string
	mint       func(context.Context, registrar.MintRequest) (registrar.MintResult, error)
	deregister func(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error)
	wantStatus int
	wantID     wire.ErrorID // "" for a success
	// wantRetryAfter is the Retry-After header ("" for none).
	wantRetryAfter string
}

func responseCases() []responseCase {
	const rid = "AAAAAAAAAAAA.1"
	refused := func(id string, r vocab.Reason) error {
		return &registrar.RefusedError{RequestID: rid, RegistrationID: id, Reason: r}
	}
	unavailable := func(id string, r registrar.UnavailableReason) error {
		return &registrar.UnavailableError{RequestID: rid, RegistrationID: id, Reason: r, Err: errors.New("disk full")}
	}
	mint := func(name string, err error, status int, id wire.ErrorID) responseCase {
		return responseCase{name: name, method: http.MethodPost, path: wire.PathMint, body: wiretest.MintBody,
			mint: mintAnswer(registrar.MintResult{RequestID: rid}, err), wantStatus: status, wantID: id}
	}
	return []responseCase{
		{name: "mint_first_mint", method: http.MethodPost, path: wire.PathMint, body: wiretest.MintBody, wantStatus: 200,
			mint: mintAnswer(registrar.MintResult{RequestID: rid, RegistrationID: "h1-review-007", Outcome: registrar.FirstMint, Material: goldenMaterial}, nil)},
		{name: "mint_idempotent_remint", method: http.MethodPost, path: wire.PathMint, body: wiretest.MintBody, wantStatus: 200,
			mint: mintAnswer(registrar.MintResult{RequestID: rid, RegistrationID: "h1-review-007", Outcome: registrar.IdempotentRemint, Material: goldenMaterial}, nil)},
		{name: "deregister_removed", method: http.MethodPost, path: wire.PathDeregister, body: wiretest.DeregisterBody, wantStatus: 200,
			deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: rid, RegistrationID: "h1-review-007", Outcome: registrar.Removed}, nil)},
		{name: "deregister_already_absent", method: http.MethodPost, path: wire.PathDeregister, body: wiretest.DeregisterBody, wantStatus: 200,
			deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: rid, RegistrationID: "h1-review-007", Outcome: registrar.AlreadyAbsent}, nil)},
		mint("ServiceLabelInvalid", refused("", vocab.ReasonInvalidServiceName), 422, wire.ServiceLabelInvalid),
		// Limited: the records were suppressed, the answer is the same.
		mint("ServiceInstanceMismatch", &registrar.RefusedError{RequestID: rid, Reason: vocab.ReasonComponentNotConfigured, Limited: true}, 422, wire.ServiceInstanceMismatch),
		mint("ServiceSpecConflict", refused("h1-review-007", vocab.ReasonStoredSpecConflict), 409, wire.ServiceSpecConflict),
		mint("ServiceRequestInvalid", refused("", vocab.ReasonInvalidWrapTTL), 422, wire.ServiceRequestInvalid),
		mint("ServiceNameCollision", refused("h1-review-007", vocab.ReasonRegistrationIDCollision), 409, wire.ServiceNameCollision),
		{name: "ServiceHostMismatch", method: http.MethodPost, path: wire.PathDeregister, body: wiretest.DeregisterBody, wantStatus: 409, wantID: wire.ServiceHostMismatch,
			deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: rid}, refused("h1-review-007", vocab.ReasonHostMismatch))},
		mint("RegistrarUnavailable_AuditUnwritable", unavailable("", registrar.AuditUnwritable), 503, wire.RegistrarUnavailable),
		mint("RegistrarUnavailable_PostMintUnrecordable", unavailable("h1-review-007", registrar.PostMintUnrecordable), 503, wire.RegistrarUnavailable),
		mint("RegistrarUnavailable_BackendUnavailable", unavailable("h1-review-007", registrar.BackendUnavailable), 503, wire.RegistrarUnavailable),
		mint("CallerNotPermitted_no_policy", refused("", vocab.ReasonNoPolicy), 403, wire.CallerNotPermitted),
		mint("CallerNotPermitted_out_of_scope", &registrar.RefusedError{RequestID: rid, Reason: vocab.ReasonOutOfScope, Scope: vocab.ScopeService}, 403, wire.CallerNotPermitted),
		{name: "CallerNotPermitted_not_owner", method: http.MethodPost, path: wire.PathDeregister, body: wiretest.DeregisterBody, wantStatus: 403, wantID: wire.CallerNotPermitted,
			deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: rid}, refused("h1-review-007", vocab.ReasonNotOwner))},
		mint("InstanceCeilingReached", &registrar.RefusedError{RequestID: rid, RegistrationID: "h1-review-007", Reason: vocab.ReasonInstanceCeiling, Ceiling: vocab.CeilingInstancesPerHost, Limit: 8}, 409, wire.InstanceCeilingReached),
		{name: "RegistrarBusy", method: http.MethodPost, path: wire.PathMint, body: wiretest.MintBody, wantStatus: 429, wantID: wire.RegistrarBusy, wantRetryAfter: "7",
			mint: mintAnswer(registrar.MintResult{RequestID: rid}, &registrar.ThrottledError{RequestID: rid, RetryAfterSeconds: 7})},
		{name: "RequestMalformed", method: http.MethodPost, path: wire.PathMint, body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":null`), wantStatus: 400, wantID: wire.RequestMalformed},
		{name: "RequestMalformed_unknown_path", method: http.MethodGet, path: "/v1/nope", wantStatus: 400, wantID: wire.RequestMalformed},
		{name: "RequestMalformed_wrong_method", method: http.MethodGet, path: wire.PathMint, wantStatus: 400, wantID: wire.RequestMalformed},
		{name: "internal_error", method: http.MethodPost, path: wire.PathMint, body: wiretest.MintBody, wantStatus: 500, wantID: wire.RegistrarUnavailable,
			mint: mintAnswer(registrar.MintResult{}, errors.New("an error of a type the wire does not know"))},
		{name: "health", method: http.MethodGet, path: wire.PathHealth, wantStatus: 200},
	}
}

func TestGoldenResponses(t *testing.T) {
	for _, tc := range responseCases() {
		t.Run(tc.name, func(t *testing.T) {
			holder := fixedHolder(t, 3, 5)
			s := newServer(t, &fakeVerbs{t: t, mint: tc.mint, deregister: tc.deregister}, holder)
			server.SetRequestIDs(s, func() string { return "wire.TESTTESTTEST.1" })
			rec := do(s, tc.method, tc.path, tc.body, nil)
			body := rec.Body.Bytes()
			checkGolden(t, "response_"+tc.name+".json", body)

			if rec.Code != tc.wantStatus {
				t.Errorf("status got %d, want %d", rec.Code, tc.wantStatus)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type got %q, want application/json", got)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.wantRetryAfter {
				t.Errorf("Retry-After got %q, want %q", got, tc.wantRetryAfter)
			}
			var u struct {
				ProtocolVersion *int            `json:"protocol_version"`
				Class           wire.Class      `json:"class"`
				Error           *wire.ErrorBody `json:"error"`
				RegistrarHealth json.RawMessage `json:"registrar_health"`
			}
			if err := json.Unmarshal(body, &u); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if u.ProtocolVersion == nil || *u.ProtocolVersion != 1 {
				t.Errorf("protocol_version got %v, want 1", u.ProtocolVersion)
			}
			if !bytes.Equal(u.RegistrarHealth, holder.Current().JSON) {
				t.Errorf("registrar_health got %s, want the holder's %s", u.RegistrarHealth, holder.Current().JSON)
			}
			if !bytes.HasPrefix(body, []byte(`{"protocol_version":1,`)) || !bytes.HasSuffix(body, append([]byte(`"registrar_health":`), append(holder.Current().JSON, "}\n"...)...)) {
				t.Errorf("body does not start with protocol_version and end with registrar_health: %s", body)
			}
			if tc.wantID == "" {
				if u.Error != nil || u.Class != "" {
					t.Errorf("a success carries error %+v class %q", u.Error, u.Class)
				}
				return
			}
			if u.Error == nil || u.Error.ID != tc.wantID {
				t.Fatalf("error got %+v, want id %s", u.Error, tc.wantID)
			}
			if u.Class != tc.wantID.Class() {
				t.Errorf("class got %q, want %q", u.Class, tc.wantID.Class())
			}
			if tc.wantStatus != 500 && rec.Code != tc.wantID.HTTPStatus() {
				t.Errorf("status %d is not the identifier's %d", rec.Code, tc.wantID.HTTPStatus())
			}
			switch tc.wantID {
			case wire.RegistrarBusy:
				if u.Error.RetryAfter < 1 || rec.Header().Get("Retry-After") != "7" || u.Error.RetryAfter != 7 {
					t.Errorf("retry_after %d and Retry-After %q, want both 7", u.Error.RetryAfter, rec.Header().Get("Retry-After"))
				}
			case wire.RequestMalformed:
				if u.Error.Detail == "" {
					t.Errorf("RequestMalformed without a detail")
				}
			case wire.CallerNotPermitted:
				if _, err := vocab.ParseReason(u.Error.Reason); err != nil || (u.Error.Reason == "out_of_scope") != (u.Error.Scope != "") {
					t.Errorf("CallerNotPermitted with reason %q and scope %q", u.Error.Reason, u.Error.Scope)
				}
			case wire.InstanceCeilingReached:
				if _, err := vocab.ParseCeiling(u.Error.Ceiling); err != nil || u.Error.Limit == 0 {
					t.Errorf("InstanceCeilingReached with ceiling %q and limit %d", u.Error.Ceiling, u.Error.Limit)
				}
			}
		})
	}
}

// captured is what a capturing handler saw.
type captured struct {
	mu     sync.Mutex
	bodies [][]byte
	header []http.Header
}

func (c *captured) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.header = append(c.header, r.Header.Clone())
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"protocol_version":1,"registrar_health":{"limiter":{"limited_predecision_refusal":0,"limited_admission":0}}}`)
	})
}

func (c *captured) last() ([]byte, http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		return nil, nil
	}
	return c.bodies[len(c.bodies)-1], c.header[len(c.header)-1]
}

// TestGoldenRequests pins the bytes the client sends, captured at the far
// end of a real unix socket, and checks the server's decoder reads them
// back.
func TestGoldenRequests(t *testing.T) {
	cap := &captured{}
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	server.SetHandler(s, cap.handler())
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	ctx := context.Background()

	withKey := wiretest.GoodMint()
	withKey.IdempotencyKey = "bring-up-42"
	noInstance := wiretest.GoodMint()
	noInstance.Component, noInstance.Spec.Component, noInstance.Instance = "edge-proxy", "edge-proxy", 0
	dereg := wiretest.GoodDeregister()
	dereg.IdempotencyKey = "bring-up-42"
	deregNoInstance := wiretest.GoodDeregister()
	deregNoInstance.Component, deregNoInstance.Instance = "edge-proxy", 0

	for _, tc := range []struct {
		name string
		send func() (*wire.Response, error)
		// check decodes the captured body as the server would.
		check func(body []byte) error
	}{
		{"mint_with_instance", func() (*wire.Response, error) { return c.Mint(ctx, withKey) }, func(b []byte) error {
			return sameMint(b, withKey)
		}},
		{"mint_without_instance", func() (*wire.Response, error) { return c.Mint(ctx, noInstance) }, func(b []byte) error {
			return sameMint(b, noInstance)
		}},
		{"deregister_with_instance", func() (*wire.Response, error) { return c.Deregister(ctx, dereg) }, func(b []byte) error {
			return sameDeregister(b, dereg)
		}},
		{"deregister_without_instance", func() (*wire.Response, error) { return c.Deregister(ctx, deregNoInstance) }, func(b []byte) error {
			return sameDeregister(b, deregNoInstance)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.send(); err != nil {
				t.Fatal(err)
			}
			body, hdr := cap.last()
			checkGolden(t, "request_"+tc.name+".json", body)
			if got := hdr.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type got %q, want application/json", got)
			}
			if err := tc.check(body); err != nil {
				t.Error(err)
			}
		})
	}
}

func sameMint(body []byte, want wire.MintRequest) error {
	want.ProtocolVersion = 1
	return sameAs(body, want, wire.DecodeMint)
}

func sameDeregister(body []byte, want wire.DeregisterRequest) error {
	want.ProtocolVersion = 1
	return sameAs(body, want, wire.DecodeDeregister)
}

// sameAs reports whether decode reads body as want.
func sameAs[R comparable](body []byte, want R, decode func([]byte) (R, error)) error {
	got, err := decode(body)
	if err != nil {
		return err
	}
	if got != want {
		return errors.New("decoded " + jsonString(got) + ", want " + jsonString(want))
	}
	return nil
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Every response fixture carries registrar_health with the limiter member
// byte for byte as before audit_capacity joined it, followed by the
// audit_capacity member with its five fields.
func TestEveryResponseFixtureCarriesAuditCapacityBesideAnUnchangedLimiter(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "response_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no response fixtures: %v", err)
	}
	const limiterBytes = `{"limited_predecision_refusal":3,"limited_admission":5}`
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Health map[string]json.RawMessage `json:"registrar_health"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := string(resp.Health["limiter"]); got != limiterBytes {
			t.Errorf("%s: limiter member %s, want the unchanged %s", f, got, limiterBytes)
		}
		var ac map[string]json.RawMessage
		if err := json.Unmarshal(resp.Health["audit_capacity"], &ac); err != nil {
			t.Errorf("%s: audit_capacity: %v", f, err)
			continue
		}
		for _, k := range []string{"state", "free_bytes", "store_bytes", "budget_bytes", "append_failures"} {
			if _, ok := ac[k]; !ok {
				t.Errorf("%s: audit_capacity lacks %s", f, k)
			}
		}
		if len(ac) != 5 {
			t.Errorf("%s: audit_capacity has %d members, want 5", f, len(ac))
		}
		if want := `"registrar_health":{"limiter":` + limiterBytes + `,"audit_capacity":`; !bytes.Contains(body, []byte(want)) {
			t.Errorf("%s: members not in the order limiter, audit_capacity", f)
		}
	}
}
