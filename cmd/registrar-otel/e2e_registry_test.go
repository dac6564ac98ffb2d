package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// heldRegistration is one registration as its backend itself holds it,
// read from the backend's own store rather than from the daemon's answers
// or counters.
type heldRegistration struct {
	owner string // the identity recorded as its first minter
	role  string // its role id ("" when the backend holds no role)
	// secret changes whenever a secret is issued for the registration
	// (a mint or a remint): a call that reached the backend and
	// reissued the secret shows here.
	secret string
}

// registrySnapshot is the daemon's embedded registry as it is now, with
// the daemon running: an online `registrar-otel backup` over the socket
// (the daemon holds the database's lock, so it cannot be opened beside
// it), opened read-only by the test. The backend is returned open for
// further reads (VerifySecret, Binding); it is closed when the test ends.
func registrySnapshot(t *testing.T, d *daemonProc) (*embedded.Backend, map[string]embedded.Binding) {
	t.Helper()
	dir, err := os.MkdirTemp(d.dir, "snapshot-")
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := d.run("backup", "--socket", d.socket, "--out", filepath.Join(dir, embedded.FileName)); code != exitOK {
		t.Fatalf("backup of the running daemon's registry: exit %d\n%s%s", code, out, errOut)
	}
	b, err := embedded.Open(dir, embedded.Options{OpenTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var ids []string
	err = b.Registrations(context.Background(), func(r registrar.Registration) error {
		ids = append(ids, r.ID) // fn may not call the backend: read the bindings after
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	held := make(map[string]embedded.Binding, len(ids))
	for _, id := range ids {
		bnd, ok, err := b.Binding(id)
		if err != nil || !ok {
			t.Fatalf("registration %s listed, its binding: %v, %v", id, ok, err)
		}
		held[id] = bnd
	}
	return b, held
}

// embeddedHeld is registrySnapshot as heldRegistrations: a secret is
// identified by when it was issued.
func embeddedHeld(t *testing.T, d *daemonProc) map[string]heldRegistration {
	t.Helper()
	_, bindings := registrySnapshot(t, d)
	out := make(map[string]heldRegistration, len(bindings))
	for id, b := range bindings {
		out[id] = heldRegistration{owner: b.Owner, role: b.RoleID, secret: b.IssuedAt.Format(time.RFC3339Nano) + " " + b.ExpiresAt.Format(time.RFC3339Nano)}
	}
	return out
}
