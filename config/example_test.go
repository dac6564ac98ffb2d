package config_test

import (
	"errors"
	"fmt"

	"github.com/registrar-otel/registrar-otel/config"
)

// Without a file, Load returns the embedded defaults, overridden by the
// REGISTRAR_OTEL_ environment variables (os.Environ() in production).
func ExampleLoad() {
	cfg, err := config.Load("", []string{
		"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600",
		"HOME=/root", // not ours: ignored
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := cfg.Registrar
	fmt.Println("source:", cfg.Source)
	fmt.Printf("admission: burst %d, one token every %d ms\n", r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS)
	fmt.Printf("coalesce window: %d s\n", r.RateLimitCoalesceWindowSeconds)
	fmt.Println("review:", r.Components["review"])
	// Output:
	// source: embedded defaults
	// admission: burst 600, one token every 500 ms
	// coalesce window: 60 s
	// review: many-per-host
}

// Every error of a file is reported at once, each naming its key.
func ExampleLoad_errors() {
	_, err := config.Load("testdata/invalid_several_errors.toml", nil, nil)
	fmt.Println(err)

	var ke *config.KeyError
	if errors.As(err, &ke) {
		fmt.Println("first key:", ke.Key)
	}
	// Output:
	// registrar.tls_cert_file is required when registrar.tls_listen is set
	// registrar.tls_key_file is required when registrar.tls_listen is set
	// registrar.tls_client_ca_file is required when registrar.tls_listen is set
	// registrar.audit_max_file_bytes must be at least 65536, got 1024
	// registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
	// registrar.rate_limit_admission_refill_interval_ms must be an unsigned integer, got -1
	// registrar.rate_limit_predecision_refusal_burst must be an unsigned integer, got "32"
	// registrar.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently
	// registrar.rate_limit_coalesce_window_seconds must be an unsigned integer, got 2.5
	// registrar.components.review.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got "sometimes"
	// telemetry.otlp_endpoint must be an http:// or https:// URL with a host, got "grpc://collector:4317"
	// telemetry.trace_sample_per_million must be at most 1000000 (every root trace), got 2000000
	// first key: registrar.tls_cert_file
}
