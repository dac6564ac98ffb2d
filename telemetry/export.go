package telemetry

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/registrar-otel/registrar-otel/config"
)

// The configuration keys of the per-signal endpoints.
const (
	keyOTLPTracesEndpoint  = "telemetry.otlp_traces_endpoint"
	keyOTLPMetricsEndpoint = "telemetry.otlp_metrics_endpoint"
)

// The standard OpenTelemetry environment variables New reads when the
// configuration says nothing about a signal. The exporters themselves also
// read OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT,
// OTEL_EXPORTER_OTLP_COMPRESSION, OTEL_EXPORTER_OTLP_CERTIFICATE and their
// per-signal forms, OTEL_BSP_* and OTEL_METRIC_EXPORT_*.
const (
	EnvOTLPEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvOTLPProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesExporter      = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter     = "OTEL_METRICS_EXPORTER"
)

// signal is one OTLP signal's export decision.
type signal struct {
	// url is the full signal URL; "" means the signal is not exported.
	url string
	// from names where url (or the decision to export nothing) came from:
	// a configuration key or an environment variable.
	from string
}

// exportPlan is where each signal goes.
type exportPlan struct {
	traces, metrics signal
}

// planExport decides, per signal, where OTLP export goes. The
// configuration wins over the environment, and the environment is read
// only for a signal the configuration says nothing about:
//
//  1. telemetry.otlp_<signal>_endpoint: config.SignalOff exports nothing,
//     a URL is used as is;
//  2. telemetry.otlp_endpoint: <endpoint>/v1/<signal>;
//  3. OTEL_<SIGNAL>S_EXPORTER=none exports nothing;
//  4. OTEL_EXPORTER_OTLP_<SIGNAL>S_ENDPOINT, used as is;
//  5. OTEL_EXPORTER_OTLP_ENDPOINT: <endpoint>/v1/<signal>;
//  6. otherwise nothing is exported.
//
// getenv nil means os.Getenv. Every broken key or variable is reported
// at once; a URL is never echoed with its credentials.
func planExport(cfg config.Telemetry, getenv func(string) string) (exportPlan, []error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	var base *url.URL
	if cfg.OTLPEndpoint != "" {
		u, err := checkURL(keyOTLPEndpoint, "", cfg.OTLPEndpoint)
		if err != nil {
			errs = append(errs, err)
		}
		base = u
	}
	one := func(key, env, exporterEnv, path, value string) signal {
		switch {
		case value == config.SignalOff:
			return signal{from: key}
		case value != "":
			u, err := checkURL(key, "", value)
			if err != nil {
				errs = append(errs, err)
				return signal{}
			}
			return signal{url: u.String(), from: key}
		case cfg.OTLPEndpoint != "":
			if base == nil {
				return signal{}
			}
			return signal{url: signalURL(base, path), from: keyOTLPEndpoint}
		}
		// The configuration is silent: the standard variables decide.
		if strings.TrimSpace(strings.ToLower(getenv(exporterEnv))) == "none" {
			return signal{from: exporterEnv}
		}
		if v := getenv(env); v != "" {
			u, err := checkURL(key, env, v)
			if err != nil {
				errs = append(errs, err)
				return signal{}
			}
			return signal{url: u.String(), from: env}
		}
		if v := getenv(EnvOTLPEndpoint); v != "" {
			u, err := checkURL(keyOTLPEndpoint, EnvOTLPEndpoint, v)
			if err != nil {
				errs = append(errs, err)
				return signal{}
			}
			return signal{url: signalURL(u, path), from: EnvOTLPEndpoint}
		}
		return signal{}
	}
	var p exportPlan
	p.traces = one(keyOTLPTracesEndpoint, EnvOTLPTracesEndpoint, EnvTracesExporter, tracesPath, cfg.OTLPTracesEndpoint)
	p.metrics = one(keyOTLPMetricsEndpoint, EnvOTLPMetricsEndpoint, EnvMetricsExporter, metricsPath, cfg.OTLPMetricsEndpoint)
	// The OpenBao rule, for the collector's credentials: with headers
	// configured (an API key, a bearer token), an endpoint must be https://
	// unless its host is a loopback address, or they would travel in clear.
	insecure := map[string]bool{} // by key or variable: otlp_endpoint once, not per signal
	for _, sg := range []struct {
		s       signal
		headers string
	}{{p.traces, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}, {p.metrics, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"}} {
		if sg.s.url == "" {
			continue
		}
		hv := sg.headers
		if getenv(hv) == "" {
			hv = "OTEL_EXPORTER_OTLP_HEADERS"
		}
		if getenv(hv) == "" {
			continue
		}
		if u, err := url.Parse(sg.s.url); err == nil && u.Scheme == "http" && !loopbackHost(u.Hostname()) && !insecure[sg.s.from] {
			insecure[sg.s.from] = true
			errs = append(errs, &HeadersInClearError{Key: sg.s.from, URL: config.RedactURL(sg.s.url), Headers: hv})
		}
	}
	if p.traces.url != "" || p.metrics.url != "" {
		// Only OTLP/HTTP with protobuf bodies is built in; a variable asking
		// for gRPC would otherwise be ignored without a word.
		if v := getenv(EnvOTLPProtocol); v != "" && v != "http/protobuf" {
			errs = append(errs, &config.KeyError{Key: EnvOTLPProtocol, Value: v,
				Rule: `must be "http/protobuf" (the only OTLP protocol registrar-otel speaks) or unset`})
		}
	}
	// Deduplicate: a broken otlp_endpoint is reported once, not per signal.
	return p, dedupErrors(errs)
}

// HeadersInClearError is an OTLP endpoint New and Check refuse: an
// http:// URL whose host is not a loopback address while a headers
// variable (OTEL_EXPORTER_OTLP_HEADERS, or the signal's own) is set. The
// headers usually carry the collector's credentials (an API key, a bearer
// token), which would travel in clear; the OpenBao backend's address
// follows the same rule. It unwraps to the *config.KeyError naming Key, so
// a caller keying errors by configuration key finds it there.
type HeadersInClearError struct {
	// Key is where the URL came from: a configuration key
	// (telemetry.otlp_endpoint, telemetry.otlp_traces_endpoint,
	// telemetry.otlp_metrics_endpoint) or an OTEL_EXPORTER_OTLP_*ENDPOINT
	// variable.
	Key string
	// URL is the signal's URL, credentials redacted.
	URL string
	// Headers is the variable holding the headers.
	Headers string
}

func (e *HeadersInClearError) Error() string { return e.keyError().Error() }

// Unwrap returns the *config.KeyError naming Key.
func (e *HeadersInClearError) Unwrap() error { return e.keyError() }

func (e *HeadersInClearError) keyError() *config.KeyError {
	return config.SecretKeyError(e.Key, e.URL,
		"must be an https:// URL unless its host is a loopback address while "+e.Headers+" is set: over http:// the headers would travel in clear")
}

// checkURL applies the endpoint rules to value, from key or (when env is
// not "") from the environment variable env.
func checkURL(key, env, value string) (*url.URL, error) {
	name := key
	if env != "" {
		name = env
	}
	u, err := url.Parse(value)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		// Redacted even when it does not parse: a mistyped URL may still
		// carry a password.
		return nil, config.SecretKeyError(name, value, "must be an http:// or https:// URL with a host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		// The exporters would silently drop these parts; say so instead.
		// Redacted: the message must not echo a password.
		return nil, config.SecretKeyError(name, value, "must not carry credentials, a query or a fragment (put credentials in "+headersVar(key)+")")
	}
	return u, nil
}

// headersVar names the headers variable that goes with an endpoint key.
func headersVar(key string) string {
	switch key {
	case keyOTLPTracesEndpoint:
		return "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	case keyOTLPMetricsEndpoint:
		return "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
	}
	return "OTEL_EXPORTER_OTLP_HEADERS"
}

func dedupErrors(errs []error) []error {
	var out []error
	seen := map[string]bool{}
	for _, e := range errs {
		if s := e.Error(); !seen[s] {
			seen[s] = true
			out = append(out, e)
		}
	}
	return out
}

// describe is the log line's view of a signal: its URL or "off (why)".
func (s signal) describe() string {
	if s.url != "" {
		return s.url
	}
	if s.from != "" {
		return fmt.Sprintf("off (%s)", s.from)
	}
	return "off"
}

// loopbackHost reports a host the traffic to which stays on this machine:
// "localhost" or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
