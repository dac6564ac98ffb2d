package registrar_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/registrar"
)

func TestBackendStatusesNameThemselves(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{registrar.MintCreated.String(), "MintCreated"},
		{registrar.MintReissued.String(), "MintReissued"},
		{registrar.MintCollision.String(), "MintCollision"},
		{registrar.MintSpecConflict.String(), "MintSpecConflict"},
		{registrar.MintNotOwner.String(), "MintNotOwner"},
		{registrar.MintCeilingReached.String(), "MintCeilingReached"},
		{registrar.MintStatus(0).String(), "MintStatus(0)"},
		{registrar.MintStatus(9).String(), "MintStatus(9)"},
		{registrar.DeregisterRemoved.String(), "DeregisterRemoved"},
		{registrar.DeregisterAbsent.String(), "DeregisterAbsent"},
		{registrar.DeregisterHostMismatch.String(), "DeregisterHostMismatch"},
		{registrar.DeregisterNotOwner.String(), "DeregisterNotOwner"},
		{registrar.DeregisterStatus(200).String(), "DeregisterStatus(200)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
