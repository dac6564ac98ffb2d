package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// BenchmarkMintOverSocket drives mints through the real unix socket with
// keep-alive: admitted (the real verbs over in-memory fakes, a burst that
// never runs out), throttled (the admission bucket drained), and the peer
// to compare them with: the same server plumbing (listener, connection
// cap, identity, timeouts, client) with a handler that answers a fixed 200
// JSON.
func BenchmarkMintOverSocket(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, c *wire.Client, wantStatus int) {
		b.Helper()
		b.ReportAllocs()
		req := wiretest.GoodMint()
		for b.Loop() {
			res, err := c.Mint(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if res.StatusCode != wantStatus {
				b.Fatalf("status got %d, want %d: %s", res.StatusCode, wantStatus, res.Body)
			}
		}
	}

	b.Run("admitted", func(b *testing.B) {
		rv := newRealVerbs(b, 32, 1<<31, registrartest.NewBackend(nil), &audittest.AuditLog{Discard: true})
		s := newServer(b, rv.v, fixedHolder(b, 0, 0))
		c := wire.NewUnixClient(serveUnix(b, s))
		defer c.CloseIdleConnections()
		run(b, c, http.StatusOK)
	})

	// The same admitted mint with the production telemetry: the SDK meter
	// provider behind the Prometheus exporter, and every span sampled and
	// recorded (the worst case: telemetry.trace_sample_per_million = 1000000).
	b.Run("admitted-instrumented", func(b *testing.B) {
		tel, err := telemetry.New(ctx, config.Telemetry{ServiceName: "bench", TraceSamplePerMillion: 1_000_000}, telemetry.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer tel.Shutdown(ctx)
		obs, err := telemetry.NewVerbObserver(tel.MeterProvider(), tel.Histograms())
		if err != nil {
			b.Fatal(err)
		}
		rv := newRealVerbs(b, 32, 1<<31, registrartest.NewBackend(nil), &audittest.AuditLog{Discard: true}, func(d *registrar.Deps) {
			d.TracerProvider, d.Observer = tel.TracerProvider(), obs
		})
		s := newServer(b, rv.v, fixedHolder(b, 0, 0))
		c := wire.NewUnixClient(serveUnix(b, s))
		defer c.CloseIdleConnections()
		run(b, c, http.StatusOK)
	})

	b.Run("throttled", func(b *testing.B) {
		backend := registrartest.NewBackend(nil)
		rv := newRealVerbs(b, 32, 1, backend, &audittest.AuditLog{Discard: true})
		s := newServer(b, rv.v, fixedHolder(b, 0, 0))
		c := wire.NewUnixClient(serveUnix(b, s))
		defer c.CloseIdleConnections()
		// Spend the one admission token; the limiter's clock stands still,
		// so none comes back.
		if res, err := c.Mint(ctx, wiretest.GoodMint()); err != nil || !res.OK() {
			b.Fatalf("draining mint: %+v, %v", res, err)
		}
		calls := backend.Calls()
		run(b, c, http.StatusTooManyRequests)
		if got := backend.Calls(); got != calls {
			b.Fatalf("backend calls got %d, want %d: a throttled mint reached the backend", got, calls)
		}
	})

	b.Run("noop-handler", func(b *testing.B) {
		s := newServer(b, unreachableVerbs(b), fixedHolder(b, 0, 0))
		health := []byte(`{"protocol_version":1,"registrar_health":{"limiter":{"limited_predecision_refusal":0,"limited_admission":0}}}` + "\n")
		server.SetHandler(s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(health)
		}))
		c := wire.NewUnixClient(serveUnix(b, s))
		defer c.CloseIdleConnections()
		run(b, c, http.StatusOK)
	})
}
