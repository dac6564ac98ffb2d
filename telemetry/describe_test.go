package telemetry

import "testing"

// The log line names a signal's URL, or says it is off and, when known,
// why.
func TestASignalIsDescribedByItsURLOrWhyItIsOff(t *testing.T) {
	for s, want := range map[signal]string{
		{url: "http://127.0.0.1:4318/v1/traces", from: "telemetry.otlp_traces_endpoint"}: "http://127.0.0.1:4318/v1/traces",
		{from: "OTEL_TRACES_EXPORTER=none"}:                                              "off (OTEL_TRACES_EXPORTER=none)",
		{}:                                                                               "off",
	} {
		if got := s.describe(); got != want {
			t.Errorf("%+v.describe() = %q, want %q", s, got, want)
		}
	}
}
