package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// exampleVerbs stands in for *registrar.Verbs: every mint is a first mint.
type exampleVerbs struct{}

func (exampleVerbs) Mint(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
	return registrar.MintResult{
		RequestID:      "AAAAAAAAAAAA.1",
		RegistrationID: fmt.Sprintf("%s-%s-%03d", req.Host, req.Component, req.Instance),
		Outcome:        registrar.FirstMint,
		Material: registrar.Material{RoleID: "role-1", WrappedSecretID: "secret",
			ExpiresAt: time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC)},
	}, nil
}

func (exampleVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return registrar.DeregisterResult{}, &registrar.ThrottledError{RequestID: "AAAAAAAAAAAA.2", RetryAfterSeconds: 2}
}

func Example() {
	holder, err := health.NewHolder() // the daemon passes health.LimiterSource(counts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := server.New(server.Options{Verbs: exampleVerbs{}, Health: holder})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "wire-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "run", "registrar.sock")
	l, err := server.ListenUnix(socket) // run/ is created 0700, the socket is 0600
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	c := wire.NewUnixClient(socket)
	defer c.CloseIdleConnections()
	ctx := context.Background()

	res, err := c.Mint(ctx, wire.MintRequest{
		ServiceName: "review", Host: "h1", Instance: 7, Component: "review",
		Spec:    wire.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTL: 300,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, res.Outcome, res.RegistrationID, res.Material.ExpiresAt)

	res, err = c.Deregister(ctx, wire.DeregisterRequest{ServiceName: "review", Host: "h1", Instance: 7, Component: "review"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, res.ErrorID, res.Class, "retry after", res.RetryAfterHeader, "s")

	res, err = c.Deregister(ctx, wire.DeregisterRequest{ProtocolVersion: 2, ServiceName: "review", Host: "h1", Component: "review"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, res.ErrorID, res.Class, res.Detail)
	fmt.Println("limited admission so far:", res.Health.Limiter.LimitedAdmission)
	// Output:
	// 200 first_mint h1-review-007 2026-12-01T12:05:00.000Z
	// 429 RegistrarBusy retryable retry after 2 s
	// 400 RequestMalformed permanent protocol_version: must be 1, the only version this server speaks
	// limited admission so far: 0
}
