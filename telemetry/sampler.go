package telemetry

import (
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/config"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OpenTelemetry SDK's sampler variables. They are the SDK's, not keys of
// the configuration file, and they keep the meaning the OpenTelemetry
// specification gives them.
const (
	// EnvTracesSampler names the sampler. When it is set the SDK builds
	// the sampler from it (and EnvTracesSamplerArg) and
	// telemetry.trace_sample_per_million is not used.
	EnvTracesSampler = "OTEL_TRACES_SAMPLER"
	// EnvTracesSamplerArg is the sampler's argument: for the ratio
	// samplers a number from 0 to 1. Without EnvTracesSampler it is the
	// argument of the daemon's own sampler (parentbased_traceidratio), in
	// place of telemetry.trace_sample_per_million.
	EnvTracesSamplerArg = "OTEL_TRACES_SAMPLER_ARG"
)

// sdkSamplers are the values of OTEL_TRACES_SAMPLER the Go SDK builds;
// true marks the two that read OTEL_TRACES_SAMPLER_ARG.
var sdkSamplers = map[string]bool{
	"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true,
}

// rootSampler returns the sampler the TracerProvider is given, or nil when
// OTEL_TRACES_SAMPLER is set and the SDK is to build it from the
// environment. Its error names the variable at fault.
func rootSampler(cfg config.Telemetry, getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv(EnvTracesSampler)))
	arg := strings.TrimSpace(getenv(EnvTracesSamplerArg))
	if name != "" {
		readsArg, ok := sdkSamplers[name]
		if !ok {
			return nil, &config.KeyError{Key: EnvTracesSampler, Value: getenv(EnvTracesSampler),
				Rule: "must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"}
		}
		if readsArg && arg != "" {
			if _, err := parseRatioArg(arg); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	ratio := cfg.TraceSampleRatio()
	if arg != "" {
		r, err := parseRatioArg(arg)
		if err != nil {
			return nil, err
		}
		ratio = r
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
}

// parseRatioArg reads OTEL_TRACES_SAMPLER_ARG as the SDK does: a decimal
// number from 0 to 1.
func parseRatioArg(arg string) (float64, error) {
	r, err := strconv.ParseFloat(arg, 64)
	if err != nil || !(r >= 0 && r <= 1) {
		return 0, &config.KeyError{Key: EnvTracesSamplerArg, Value: arg, Rule: "must be a number from 0 to 1 (the SDK's traceidratio argument)"}
	}
	return r, nil
}
