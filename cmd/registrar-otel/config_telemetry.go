package main

import (
	"context"
	"strings"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// checkTelemetry applies to the [telemetry] table and the OTEL_* variables
// of environ every rule serve's start applies (telemetry.Check, the code
// telemetry.New runs): where each signal is exported, the headers rule
// (an http:// endpoint to another host while OTEL_EXPORTER_OTLP_HEADERS is
// set), the sampler variables and the exporters' own refusals. Each error
// is reported under the key or variable it names.
func checkTelemetry(res *checkResult, cfg *config.Config, environ []string) {
	res.addErrors(telemetry.Check(context.Background(), cfg.Telemetry, lookupIn(environ)))
}

// lookupIn is os.Getenv over environ: the last assignment of a name wins,
// as in the process environment it stands for.
func lookupIn(environ []string) func(string) string {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return func(k string) string { return vars[k] }
}
