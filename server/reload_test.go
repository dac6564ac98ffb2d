package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

func reloadServer(t *testing.T, allowed func(uint32) bool, res wire.ReloadResult, calls *int) string {
	t.Helper()
	rv := newRealVerbs(t, 32, 512, registrartest.FailingBackend{T: t}, &audittest.AuditLog{})
	s, err := server.New(server.Options{
		Verbs:        rv.v,
		Health:       fixedHolder(t, 0, 0),
		AdminAllowed: allowed,
		Reload: func(context.Context) wire.ReloadResult {
			*calls++
			return res
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return serveUnix(t, s)
}

func TestReloadOverTheSocketAnswersTheDaemonsResult(t *testing.T) {
	calls := 0
	want := wire.ReloadResult{Applied: true, Changes: []wire.ReloadChange{{Key: "registrar.rate_limit_admission_burst", Old: "8", New: "64"}}}
	c := wire.NewUnixClient(reloadServer(t, nil, want, &calls))
	defer c.CloseIdleConnections()
	got, err := c.Reload(context.Background())
	if err != nil {
		t.Fatalf("Reload by the daemon's own uid %d: %v", os.Geteuid(), err)
	}
	if !got.Applied || len(got.Changes) != 1 || got.Changes[0] != want.Changes[0] || calls != 1 {
		t.Fatalf("Reload = %+v after %d calls, want %+v after 1", got, calls, want)
	}

	refused := wire.ReloadResult{Changes: []wire.ReloadChange{{Key: "registrar.socket_path", Old: "a", New: "b", RestartOnly: true}},
		Errors: []string{"registrar.socket_path changed: it needs a restart"}}
	c2 := wire.NewUnixClient(reloadServer(t, nil, refused, &calls))
	defer c2.CloseIdleConnections()
	got, err = c2.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Applied || len(got.Errors) != 1 || got.Errors[0] != refused.Errors[0] || !got.Changes[0].RestartOnly {
		t.Fatalf("refused Reload = %+v, want %+v", got, refused)
	}
}

func TestReloadByAnotherUIDIsForbidden(t *testing.T) {
	calls := 0
	c := wire.NewUnixClient(reloadServer(t, func(uint32) bool { return false }, wire.ReloadResult{Applied: true}, &calls))
	defer c.CloseIdleConnections()
	_, err := c.Reload(context.Background())
	var ae *wire.AdminError
	if !errors.As(err, &ae) || ae.ID != wire.AdminForbidden || ae.StatusCode != http.StatusForbidden || ae.Detail == "" {
		t.Fatalf("Reload by a uid the policy refuses: %v, want a 403 AdminForbidden with a detail", err)
	}
	if calls != 0 {
		t.Fatalf("the daemon's reload ran %d times for a forbidden caller", calls)
	}
	if !server.DefaultAdminAllowed(0) || !server.DefaultAdminAllowed(uint32(os.Geteuid())) {
		t.Fatal("DefaultAdminAllowed refuses root or the daemon's uid")
	}
	if os.Geteuid() != 12345 && server.DefaultAdminAllowed(12345) {
		t.Fatal("DefaultAdminAllowed allows another uid")
	}
}
