package embedded_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// Example mints, remints and deregisters one registration id.
func Example() {
	base, err := os.MkdirTemp("", "embedded-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(base)

	b, err := embedded.Open(filepath.Join(base, "state"), embedded.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	ctx := context.Background()
	now := time.Date(2026, 8, 23, 12, 0, 0, 0, time.UTC)
	op := registrar.MintOp{
		RegistrationID: "web1-collector",
		Host:           "web1",
		Spec:           registrar.Spec{Component: "collector", ServiceName: "otel", Reload: "sighup"},
		WrapTTL:        5 * time.Minute,
		Now:            now,
	}
	st, first, _ := b.Mint(ctx, op)
	fmt.Println(st == registrar.MintCreated, first.ExpiresAt.Format(time.RFC3339))
	st, second, _ := b.Mint(ctx, op)
	fmt.Println(st == registrar.MintReissued, second.RoleID == first.RoleID)
	stale, _ := b.VerifySecret(op.RegistrationID, first.WrappedSecretID, now)
	fresh, _ := b.VerifySecret(op.RegistrationID, second.WrappedSecretID, now)
	fmt.Println(stale, fresh)
	dst, _ := b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: op.Host})
	fmt.Println(dst == registrar.DeregisterRemoved)
	// Output:
	// true 2026-08-23T12:05:00Z
	// true true
	// false true
	// true
}
