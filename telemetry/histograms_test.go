package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// A Histograms produces each histogram in its observer's scope: the wait
// in the telemetry package's, the duration in the registrar's (the verbs'
// spans' scope, as the SDK instrument was), each once, with only the
// series observed.
func TestHistogramsProduceEachHistogramInItsScope(t *testing.T) {
	hs := telemetry.NewHistograms()
	wireObs, err := telemetry.NewWireObserver(hs)
	if err != nil {
		t.Fatal(err)
	}
	verbObs, err := telemetry.NewVerbObserver(nil, hs)
	if err != nil {
		t.Fatal(err)
	}
	wireObs.Waited(server.ListenerUnix, 0)
	verbObs.Finished(context.Background(), vocab.Mint, registrar.ResultThrottled, time.Millisecond)
	sms, err := hs.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{telemetry.ScopeName: telemetry.WireRequestWait, registrar.ScopeName: telemetry.RegistrarInvocationDuration}
	if len(sms) != len(want) {
		t.Fatalf("%d scopes, want %d: %+v", len(sms), len(want), sms)
	}
	for _, sm := range sms {
		name, ok := want[sm.Scope.Name]
		if !ok || len(sm.Metrics) != 1 || sm.Metrics[0].Name != name {
			t.Errorf("scope %q holds %+v, want only %s", sm.Scope.Name, sm.Metrics, name)
		}
		delete(want, sm.Scope.Name)
	}
}
