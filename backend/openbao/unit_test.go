package openbao

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// These tests need no server.

func TestClassifyNamesEachKindOfFailure(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		err    error
		kind   Kind
		status int
	}{
		{"503", context.Background(), &api.ResponseError{StatusCode: 503, Errors: []string{"Vault is sealed"}}, KindServer, 503},
		{"500 wrapped", context.Background(), fmt.Errorf("reading: %w", &api.ResponseError{StatusCode: 500}), KindServer, 500},
		{"403", context.Background(), &api.ResponseError{StatusCode: 403, Errors: []string{"permission denied"}}, KindClient, 403},
		{"deadline", context.Background(), fmt.Errorf("Get: %w", context.DeadlineExceeded), KindTimeout, 0},
		{"expired context", expired, errors.New("any"), KindTimeout, 0},
		{"net timeout", context.Background(), &net.OpError{Op: "dial", Err: timeoutErr{}}, KindTimeout, 0},
		{"refused", context.Background(), &net.OpError{Op: "dial", Err: errors.New("connection refused")}, KindTransport, 0},
		{"corrupt binding", context.Background(), fmt.Errorf("%w at p: no host", ErrCorrupt), KindResponse, 0},
	} {
		kind, status := classify(c.ctx, c.err)
		if kind != c.kind || status != c.status {
			t.Errorf("%s: classify = %v, %d; want %v, %d", c.name, kind, status, c.kind, c.status)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestOnlyAFourHundredIsCertainlyNotApplied(t *testing.T) {
	var p progress
	err := p.fail("binding claimed", &RequestError{Op: OpBindingClaim, Kind: KindClient, Status: 403})
	if _, partial := errors.AsType[*registrar.PartialError](err); partial {
		t.Errorf("a refused (4xx) first write is partial: %v", err)
	}
	for _, k := range []Kind{KindTimeout, KindServer, KindTransport, KindResponse} {
		err := p.fail("binding claimed", &RequestError{Op: OpBindingClaim, Kind: k})
		pe, partial := errors.AsType[*registrar.PartialError](err)
		if !partial || len(pe.Changed) != 1 || pe.Changed[0] != "binding claimed (maybe)" {
			t.Errorf("a %v on the first write = %v, want partial, binding claimed (maybe)", k, err)
		}
	}
	p.done("binding claimed")
	err = p.fail("", &RequestError{Op: OpRoleIDRead, Kind: KindClient, Status: 404})
	if pe, partial := errors.AsType[*registrar.PartialError](err); !partial || strings.Join(pe.Changed, ",") != "binding claimed" {
		t.Errorf("a read failing after the claim = %v, want partial naming the claim", err)
	}
	if len(p.changed) != 1 {
		t.Errorf("fail modified the progress: %v", p.changed)
	}
}

func TestCASMismatchIsRecognised(t *testing.T) {
	if !isCASMismatch(fmt.Errorf("writing: %w", &api.ResponseError{StatusCode: 400, Errors: []string{"check-and-set parameter did not match the current version"}})) {
		t.Error("the KV v2 compare-and-set answer is not recognised")
	}
	for _, err := range []error{
		&api.ResponseError{StatusCode: 400, Errors: []string{"invalid request"}},
		&api.ResponseError{StatusCode: 500, Errors: []string{"check-and-set"}},
		errors.New("check-and-set"),
	} {
		if isCASMismatch(err) {
			t.Errorf("%v taken for a compare-and-set mismatch", err)
		}
	}
}

func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Options{Address: "https://openbao.internal:8200", Token: "t", KVMount: "kv", KVPrefix: "bootroot/registrar"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTheServicePolicyGrantsReadOnTheServicesOwnSecretsOnly(t *testing.T) {
	b := newTestBackend(t)
	got := ServicePolicy("kv", "bootroot/registrar", "review")
	want := `# registrar-otel-service-review: written once by the operator, attached by registrar-otel
# to the AppRole role of every registration of service review.
path "kv/data/bootroot/registrar/services/review/*" {
  capabilities = ["read"]
}
`
	if got != want {
		t.Errorf("policy =\n%s\nwant\n%s", got, want)
	}
	if b.BindingPath("web1-review-003") != "bootroot/registrar/bindings/web1-review-003" {
		t.Errorf("binding path %q", b.BindingPath("web1-review-003"))
	}
}

// The token policy grants no write on any policy, only exact values on
// role writes, and the token's own lookup and renewal.
func TestTheTokenPolicyWritesNoPolicyAndFixesEveryRoleParameter(t *testing.T) {
	got := TokenPolicy("secret", "registrar-otel", "approle", 90*time.Minute, 3)
	for _, want := range []string{
		`"secret_id_ttl"      = ["5400s"]`,
		`"secret_id_num_uses" = ["3"]`,
		`"token_policies"     = ["registrar-otel-service-*"]`,
		`"token_policies" = ["*,*"]`,
		`"bind_secret_id"     = [true]`,
		`min_wrapping_ttl = "1s"`,
		`path "auth/token/lookup-self"`,
		`path "auth/token/renew-self"`,
		`path "auth/approle/role/+"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the token policy lacks %s:\n%s", want, got)
		}
	}
	for _, bad := range []string{"sys/policies", "custom-secret-id", "services", "*\" {"} {
		if strings.Contains(got, bad) {
			t.Errorf("the token policy mentions %s:\n%s", bad, got)
		}
	}
}

func TestMintRefusesOperationsTheVerbsNeverSend(t *testing.T) {
	b := newTestBackend(t)
	good := registrar.MintOp{RegistrationID: "h1-review-001", Host: "h1", Spec: registrar.Spec{ServiceName: "review"}, WrapTTL: time.Minute, Now: time.Unix(1, 0)}
	for name, mut := range map[string]func(*registrar.MintOp){
		"empty id":        func(o *registrar.MintOp) { o.RegistrationID = "" },
		"path in id":      func(o *registrar.MintOp) { o.RegistrationID = "../sys" },
		"quote in name":   func(o *registrar.MintOp) { o.Spec.ServiceName = `a"b` },
		"sub-second TTL":  func(o *registrar.MintOp) { o.WrapTTL = time.Millisecond },
		"zero Now":        func(o *registrar.MintOp) { o.Now = time.Time{} },
		"empty host":      func(o *registrar.MintOp) { o.Host = "" },
		"upper-case name": func(o *registrar.MintOp) { o.Spec.ServiceName = "Review" },
	} {
		op := good
		mut(&op)
		if _, _, err := b.Mint(context.Background(), op); !errors.Is(err, ErrInvalidOp) {
			t.Errorf("%s: Mint = %v, want ErrInvalidOp", name, err)
		}
	}
	if _, err := b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: "a/b", Host: "h1"}); !errors.Is(err, ErrInvalidOp) {
		t.Errorf("Deregister of a path = %v, want ErrInvalidOp", err)
	}
	b.Close()
	if _, _, err := b.Mint(context.Background(), good); !errors.Is(err, ErrClosed) {
		t.Errorf("Mint after Close = %v, want ErrClosed", err)
	}
}

func TestDecodeBindingRefusesWhatItDoesNotKnow(t *testing.T) {
	good := map[string]any{"v": "1", "host": "h1", "component": "review", "service_name": "review", "reload": "", "state": "active", "created_at": "x"}
	if _, err := decodeBinding("p", 1, good); err != nil {
		t.Fatalf("a good binding: %v", err)
	}
	for name, mut := range map[string]func(m map[string]any){
		"future format": func(m map[string]any) { m["v"] = "2" },
		"number host":   func(m map[string]any) { m["host"] = 7 },
		"no state":      func(m map[string]any) { delete(m, "state") },
		"odd state":     func(m map[string]any) { m["state"] = "done" },
		"empty host":    func(m map[string]any) { m["host"] = "" },
	} {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		mut(m)
		if _, err := decodeBinding("p", 1, m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decodeBinding = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, o := range []Options{
		{Token: "t"},
		{Address: "https://x:8200"},
		{Address: "ftp://x", Token: "t"},
		{Address: "::", Token: "t"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestARequestErrorNeverCarriesTheToken(t *testing.T) {
	// The client puts the token in a header only; its errors carry the URL
	// and the server's messages.
	b, err := New(Options{Address: "http://127.0.0.1:1", Token: "s.secret-token-value", RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = b.Mint(context.Background(), registrar.MintOp{RegistrationID: "x", Host: "h", Spec: registrar.Spec{ServiceName: "x"}, WrapTTL: time.Minute, Now: time.Unix(1, 0)})
	if err == nil || strings.Contains(err.Error(), "secret-token-value") {
		t.Errorf("Mint against a closed port = %v, want an error without the token", err)
	}
	if re, ok := errors.AsType[*RequestError](err); !ok || re.Kind != KindTransport || re.Op != OpBindingRead {
		t.Errorf("error %v, want a transport *RequestError of binding_read", err)
	}
}
