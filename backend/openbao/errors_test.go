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

func (timeoutErr) Error() string { return "i/o timeout" }

func (timeoutErr) Timeout() bool { return true }

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

// AppRole's answers to destroying a secret id accessor that is already
// gone (Vault v1.21.4 builtin/credential/approle/path_role.go,
// pathRoleSecretIDAccessorDestroyUpdateDelete): the accessor entry is gone
// (expired, used up, destroyed earlier), or it was found and its secret id
// was destroyed meanwhile by a concurrent destroy (403). Both count as
// destroyed; anything else is an error.
func TestTheServersAlreadyDestroyedAnswersCountAsDestroyed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no accessor entry", &api.ResponseError{StatusCode: 500, Errors: []string{`failed to find accessor entry for secret_id_accessor: "a"`}}, true},
		{"destroyed concurrently", &api.ResponseError{StatusCode: 403, Errors: []string{"invalid secret id accessor"}}, true},
		{"no secret id", &api.ResponseError{StatusCode: 400, Errors: []string{"no secret ID found"}}, true},
		{"wrapped", fmt.Errorf("destroy: %w", &api.ResponseError{StatusCode: 403, Errors: []string{"invalid secret id accessor"}}), true},
		{"permission denied", &api.ResponseError{StatusCode: 403, Errors: []string{"permission denied"}}, false},
		{"role gone", &api.ResponseError{StatusCode: 500, Errors: []string{`role "x" does not exist`}}, false},
		{"not a response", errors.New("invalid secret id accessor"), false},
		{"nil", nil, false},
	} {
		if got := isUnknownAccessor(c.err); got != c.want {
			t.Errorf("%s: isUnknownAccessor(%v) = %t, want %t", c.name, c.err, got, c.want)
		}
	}
}

// A request error says its operation, kind and status (when the server
// answered) and the server's own words on one line: its error list when it
// sent one, else the client's error.
func TestARequestErrorSaysItsStatusAndTheServersOwnWords(t *testing.T) {
	for _, c := range []struct {
		name string
		err  *RequestError
		want string
	}{
		{"the server's list", &RequestError{Op: OpSecretIDDestroy, Kind: KindClient, Status: 403,
			Err: &api.ResponseError{StatusCode: 403, Errors: []string{"invalid secret id accessor", "1 error occurred:\n\t* permission denied\n\n"}}},
			"openbao: secret_id_destroy: client_error (HTTP 403): invalid secret id accessor; 1 error occurred: * permission denied"},
		{"an answer without a list", &RequestError{Op: OpRoleWrite, Kind: KindServer, Status: 502,
			Err: &api.ResponseError{HTTPMethod: "PUT", URL: "http://x/v1/r", StatusCode: 502}},
			"openbao: role_write: server_error (HTTP 502): " + oneLine((&api.ResponseError{HTTPMethod: "PUT", URL: "http://x/v1/r", StatusCode: 502}).Error())},
		{"no answer", &RequestError{Op: OpSecretIDList, Kind: KindTransport, Err: errors.New("dial tcp:\n connection refused")},
			"openbao: secret_id_list: transport: dial tcp: connection refused"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
