package telemetry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// BenchmarkAuditObserver measures the cost the observer adds to every
// audit append (which itself costs an fsync, tens of µs at best).
func BenchmarkAuditObserver(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := telemetry.NewAuditObserver(mp)
	if err != nil {
		b.Fatal(err)
	}
	fail := errors.New("disk full")
	b.ReportAllocs()
	var i int
	for b.Loop() {
		var err error
		if i%16 == 0 {
			err = fail
		}
		obs.Appended(audit.PhaseIntent, 80*time.Microsecond, err)
		i++
	}
}

// BenchmarkScrape measures one /metrics scrape of every registered series
// (a Prometheus cost paid once per scrape interval, not per invocation).
func BenchmarkScrape(b *testing.B) {
	tel, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if err := telemetry.RegisterLimiter(tel.MeterProvider(), fakeLimiterStats); err != nil {
		b.Fatal(err)
	}
	if err := telemetry.RegisterCoalesce(tel.MeterProvider(), fakeCoalesceStats); err != nil {
		b.Fatal(err)
	}
	obs, err := telemetry.NewAuditObserver(tel.MeterProvider())
	if err != nil {
		b.Fatal(err)
	}
	obs.Appended(audit.PhaseIntent, time.Millisecond, nil)
	h := tel.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := newDiscardRecorder()
		h.ServeHTTP(rec, scrapeRequest)
	}
}

var scrapeRequest = httptest.NewRequest(http.MethodGet, "/metrics", nil)

// discardRecorder is an http.ResponseWriter that drops the body.
type discardRecorder struct{ h http.Header }

func newDiscardRecorder() *discardRecorder { return &discardRecorder{h: http.Header{}} }

func (d *discardRecorder) Header() http.Header         { return d.h }
func (d *discardRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardRecorder) WriteHeader(int)             {}

// BenchmarkWireObserverWaited is the wait histogram's cost on every
// request served, from as many goroutines as processors: an observation of
// a zero wait under one listener. Its peer, the SDK histogram's Record it
// replaced, is measured beside the histogram (internal/exacthist,
// BenchmarkObserve).
func BenchmarkWireObserverWaited(b *testing.B) {
	o, err := telemetry.NewWireObserver(telemetry.NewHistograms())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Waited(server.ListenerUnix, 0)
		}
	})
}
