package wire_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

func TestEveryIdentifierHasTheSpecsClassAndStatus(t *testing.T) {
	want := []struct {
		id     wire.ErrorID
		class  wire.Class
		status int
	}{
		{wire.ServiceLabelInvalid, wire.Permanent, 422},
		{wire.ServiceInstanceMismatch, wire.Permanent, 422},
		{wire.ServiceSpecConflict, wire.Permanent, 409},
		{wire.ServiceRequestInvalid, wire.Permanent, 422},
		{wire.ServiceNameCollision, wire.Permanent, 409},
		{wire.ServiceHostMismatch, wire.Permanent, 409},
		{wire.RegistrarUnavailable, wire.Permanent, 503},
		{wire.RegistrarBusy, wire.Retryable, 429},
		{wire.RequestMalformed, wire.Permanent, 400},
		{wire.CallerNotPermitted, wire.Permanent, 403},
		{wire.InstanceCeilingReached, wire.Permanent, 409},
	}
	ids := wire.IDs()
	if len(ids) != len(want) {
		t.Fatalf("IDs() has %d identifiers, want %d", len(ids), len(want))
	}
	for i, w := range want {
		t.Run(string(w.id), func(t *testing.T) {
			if ids[i] != w.id {
				t.Errorf("IDs()[%d] = %s, want %s (the spec's table order)", i, ids[i], w.id)
			}
			if got := w.id.Class(); got != w.class {
				t.Errorf("class got %q, want %q", got, w.class)
			}
			if got := w.id.HTTPStatus(); got != w.status {
				t.Errorf("HTTP status got %d, want %d", got, w.status)
			}
			if !w.id.Valid() {
				t.Errorf("Valid() = false")
			}
		})
	}
}

func TestRegistrarBusyIsTheOnlyRetryableIdentifier(t *testing.T) {
	for _, id := range wire.IDs() {
		if got, want := id.Class() == wire.Retryable, id == wire.RegistrarBusy; got != want {
			t.Errorf("%s retryable got %v, want %v", id, got, want)
		}
	}
	if c, s := wire.ErrorID("Nope").Class(), wire.ErrorID("Nope").HTTPStatus(); c != "" || s != 0 || wire.ErrorID("Nope").Valid() {
		t.Errorf("an id outside the set got class %q status %d, want none", c, s)
	}
}

// TestEveryRefusalReasonMapsToItsIdentifier walks every vocab.Reason: a
// reason added without a case in IDForReason fails here.
func TestEveryRefusalReasonMapsToItsIdentifier(t *testing.T) {
	want := map[vocab.Reason]wire.ErrorID{
		vocab.ReasonInvalidServiceName:       wire.ServiceLabelInvalid,
		vocab.ReasonInvalidHost:              wire.ServiceLabelInvalid,
		vocab.ReasonReservedServiceName:      wire.ServiceLabelInvalid,
		vocab.ReasonSpecIdentityDisagreement: wire.ServiceSpecConflict,
		vocab.ReasonComponentNotConfigured:   wire.ServiceInstanceMismatch,
		vocab.ReasonServiceInstanceMismatch:  wire.ServiceInstanceMismatch,
		vocab.ReasonInvalidWrapTTL:           wire.ServiceRequestInvalid,
		vocab.ReasonDerivedKeyInvalid:        wire.ServiceRequestInvalid,
		vocab.ReasonRegistrationIDCollision:  wire.ServiceNameCollision,
		vocab.ReasonStoredSpecConflict:       wire.ServiceSpecConflict,
		vocab.ReasonHostMismatch:             wire.ServiceHostMismatch,
		vocab.ReasonBackendUnavailable:       wire.RegistrarUnavailable,
		vocab.ReasonNoPolicy:                 wire.CallerNotPermitted,
		vocab.ReasonOutOfScope:               wire.CallerNotPermitted,
		vocab.ReasonNotOwner:                 wire.CallerNotPermitted,
		vocab.ReasonInstanceCeiling:          wire.InstanceCeilingReached,
	}
	n := 0
	for r := vocab.Reason(1); r.Valid(); r++ {
		n++
		t.Run(r.String(), func(t *testing.T) {
			id, ok := wire.IDForReason(r)
			if !ok {
				t.Fatalf("reason %v (%d) has no identifier: add it to IDForReason's switch", r, uint8(r))
			}
			if id != want[r] {
				t.Errorf("got %s, want %s", id, want[r])
			}
			if id == wire.RegistrarBusy || id == wire.RequestMalformed {
				t.Errorf("a verb refusal mapped to %s", id)
			}
		})
	}
	if n != 16 {
		t.Errorf("walked %d reasons, want 16", n)
	}
	for _, r := range []vocab.Reason{0, 17, 255} {
		if id, ok := wire.IDForReason(r); ok {
			t.Errorf("reason %d outside the set mapped to %s", uint8(r), id)
		}
	}
}

func TestMalformedErrorDetailIsBounded(t *testing.T) {
	// A duplicated 50 000-byte member name: the detail names it, cut short.
	huge := fmt.Sprintf(`{"protocol_version":1,"%s":1,"%[1]s":2}`, strings.Repeat("k", 50000))
	_, err := wire.DecodeDeregister([]byte(huge))
	var me *wire.MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a *MalformedError", err)
	}
	if len(me.Detail) == 0 || len(me.Detail) > wire.MaxDetailBytes {
		t.Errorf("detail is %d bytes, want 1..%d: %q", len(me.Detail), wire.MaxDetailBytes, me.Detail)
	}
	if http.StatusText(wire.RequestMalformed.HTTPStatus()) != "Bad Request" {
		t.Errorf("RequestMalformed is not 400")
	}
}

func TestThrottleWithoutARetryAfterAdvertisesOneSecond(t *testing.T) {
	status, body, retryAfter, err := wire.RefusalFor(&registrar.ThrottledError{RequestID: "r.1"})
	if err != nil || status != 429 || retryAfter != 1 || body.Error.RetryAfter != 1 {
		t.Fatalf("got %d %+v retry-after %d, %v; want 429 with 1 s in both", status, body, retryAfter, err)
	}
}

func TestUnmappableVerbAnswersAreInternal(t *testing.T) {
	for _, err := range []error{
		errors.New("plain"),
		&registrar.RefusedError{RequestID: "r.1", Reason: 200},
		&registrar.UnavailableError{RequestID: "r.1", Reason: 200},
	} {
		if _, _, _, ierr := wire.RefusalFor(err); !errors.Is(ierr, wire.ErrUnmappable) {
			t.Errorf("%v: got %v, want wire.ErrUnmappable", err, ierr)
		}
	}
}

// CallerNotPermitted carries its reason, and out_of_scope its scope;
// InstanceCeilingReached its ceiling and limit. A refusal missing what its
// payload must name is an internal error, never an answer without it.
func TestAuthorizationRefusalsCarryTheirPayload(t *testing.T) {
	for _, tc := range []struct {
		err    *registrar.RefusedError
		status int
		want   wire.ErrorBody
	}{
		{&registrar.RefusedError{RequestID: "r.1", Reason: vocab.ReasonNoPolicy}, 403,
			wire.ErrorBody{ID: wire.CallerNotPermitted, Reason: "no_policy"}},
		{&registrar.RefusedError{RequestID: "r.1", Reason: vocab.ReasonOutOfScope, Scope: vocab.ScopeHost}, 403,
			wire.ErrorBody{ID: wire.CallerNotPermitted, Reason: "out_of_scope", Scope: "host"}},
		{&registrar.RefusedError{RequestID: "r.1", RegistrationID: "h1-review-007", Reason: vocab.ReasonNotOwner}, 403,
			wire.ErrorBody{ID: wire.CallerNotPermitted, Reason: "not_owner"}},
		{&registrar.RefusedError{RequestID: "r.1", RegistrationID: "h1-review-007", Reason: vocab.ReasonInstanceCeiling, Ceiling: vocab.CeilingRegistrations, Limit: 40}, 409,
			wire.ErrorBody{ID: wire.InstanceCeilingReached, Ceiling: "max_registrations", Limit: 40}},
	} {
		status, body, _, err := wire.RefusalFor(tc.err)
		if err != nil || status != tc.status || body.Error != tc.want || body.Class != wire.Permanent || body.RegistrationID != tc.err.RegistrationID {
			t.Errorf("%v: got %d %+v, %v; want %d %+v", tc.err, status, body, err, tc.status, tc.want)
		}
	}
	for _, bad := range []*registrar.RefusedError{
		{RequestID: "r.1", Reason: vocab.ReasonOutOfScope},
		{RequestID: "r.1", Reason: vocab.ReasonOutOfScope, Scope: 9},
		{RequestID: "r.1", Reason: vocab.ReasonInstanceCeiling, Limit: 3},
		{RequestID: "r.1", Reason: vocab.ReasonInstanceCeiling, Ceiling: vocab.CeilingInstancesPerHost},
	} {
		if _, _, _, err := wire.RefusalFor(bad); !errors.Is(err, wire.ErrUnmappable) {
			t.Errorf("%+v: got %v, want wire.ErrUnmappable", bad, err)
		}
	}
}
