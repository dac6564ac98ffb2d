package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestSuggestKeyFindsTheKnownKeyOneEditAway(t *testing.T) {
	for _, tc := range []struct{ unknown, want string }{
		{"registrar.rate_limit_admision_burst", "registrar.rate_limit_admission_burst"},   // deletion
		{"registrar.rate_limit_admissionn_burst", "registrar.rate_limit_admission_burst"}, // insertion
		{"registrar.rate_limit_admission_bursT", "registrar.rate_limit_admission_burst"},  // case
		{"registrar.rate_limit_admission_brust", "registrar.rate_limit_admission_burst"},  // transposition
		{"registrar.socket_pathx", "registrar.socket_path"},                               // insertion at the end
		{"registrar.xocket_path", "registrar.socket_path"},                                // substitution at the start
		{"telemetry.otlp_endpiont", "telemetry.otlp_endpoint"},                            // transposition
		{"registar", "registrar"},  // a table
		{"telemetri", "telemetry"}, // a table
		{"registrar.components.review.multiplicty", "registrar.components.review.multiplicity"}, // any component name
		{"registrar.audit_store_backend", ""},                                                   // a genuinely new key
		{"registrar.rate_limit_admission_burst_extra", ""},
		{"registrar.rate_limit_admission_burst", ""}, // known: not a misspelling of itself
		{"registrar.rate_limit_admission", ""},
		{"telemetry.rate_limit_admision_burst", ""}, // a registrar key under the wrong table is not one edit away
		{"", ""},
		{"...", ""},
	} {
		if got := SuggestKey(tc.unknown); got != tc.want {
			t.Errorf("SuggestKey(%q) = %q, want %q", tc.unknown, got, tc.want)
		}
	}
}

func TestOneEdit(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"abc", "abc", false}, {"abc", "abd", true}, {"abc", "ab", true}, {"abc", "bc", true},
		{"abc", "bac", true}, {"abc", "acb", true}, {"abc", "cba", false}, {"abc", "a", false},
		{"", "a", true}, {"", "", false}, {"abcd", "abdc", true}, {"abcd", "badc", false},
	} {
		if got := oneEdit(tc.a, tc.b); got != tc.want {
			t.Errorf("oneEdit(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := oneEdit(tc.b, tc.a); got != tc.want {
			t.Errorf("oneEdit(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestLoadNamesTheLikelyMisspellingInTheWarning(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := loadBytes("m.toml", []byte("[registrar]\nrate_limit_admision_burst = 4\nfuture_key = 1\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n"), nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Registrar.RateLimitAdmissionBurst != 512 {
		t.Fatalf("burst %d: the misspelt key must not set it", cfg.Registrar.RateLimitAdmissionBurst)
	}
	var misspelt, future string
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "key=registrar.rate_limit_admision_burst"):
			misspelt = line
		case strings.Contains(line, "key=registrar.future_key"):
			future = line
		}
	}
	if !strings.Contains(misspelt, "did_you_mean=registrar.rate_limit_admission_burst") {
		t.Errorf("warning for the misspelt key lacks the suggestion: %q", misspelt)
	}
	if future == "" || strings.Contains(future, "did_you_mean") {
		t.Errorf("warning for a new key: %q, want one without a suggestion", future)
	}
}

// TestSuggestEnvVarSpellsTheLevels: a single "_" between levels (or a
// case slip) gets the "__" spelling of the known key; a name that reads as
// no key gets nothing.
func TestSuggestEnvVarSpellsTheLevels(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST", "REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST"},
		{"REGISTRAR_OTEL_TELEMETRY_TRACE_SAMPLE_PER_MILLION", "REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION"},
		{"REGISTRAR_OTEL_REGISTRAR___SOCKET_PATH", "REGISTRAR_OTEL_REGISTRAR__SOCKET_PATH"},
		{"REGISTRAR_OTEL_REGISTRAR__SOCKET_PATH", ""},
		{"REGISTRAR_OTEL_NOTHING_LIKE_A_KEY", ""},
	} {
		if got := SuggestEnvVar(tc.name); got != tc.want {
			t.Errorf("SuggestEnvVar(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
