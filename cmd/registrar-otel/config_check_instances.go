package main

// config check's view of several registrars: each one's share of the
// budgets under registrar.instances, and the service.instance.id serve
// would export.

import (
	"fmt"
	"strings"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// serviceInstanceJSON is the service.instance.id in config check --json.
type serviceInstanceJSON struct {
	ID string `json:"id"`
	// From is telemetry.service_instance_id, OTEL_RESOURCE_ATTRIBUTES or
	// "derived from the host name and registrar.state_dir".
	From string `json:"from"`
}

func serviceInstanceOf(cfg *config.Config, environ []string) *serviceInstanceJSON {
	id, from := telemetry.InstanceID(cfg.Telemetry.ServiceInstanceID, cfg.Registrar.StateDir, envLookup(environ))
	return &serviceInstanceJSON{ID: id, From: from}
}

// envLookup is os.Getenv over environ (the last of a repeated name).
func envLookup(environ []string) func(string) string {
	return func(name string) string {
		v := ""
		for _, kv := range environ {
			if k, val, ok := strings.Cut(kv, "="); ok && k == name {
				v = val
			}
		}
		return v
	}
}

// shareJSON is one registrar's part of a policy's two buckets.
type shareJSON struct {
	Policy                             string `json:"policy"`
	AdmissionBurst                     uint32 `json:"rate_limit_admission_burst"`
	AdmissionRefillIntervalMS          uint64 `json:"rate_limit_admission_refill_interval_ms"`
	PredecisionRefusalBurst            uint32 `json:"rate_limit_predecision_refusal_burst"`
	PredecisionRefusalRefillIntervalMS uint64 `json:"rate_limit_predecision_refusal_refill_interval_ms"`
	// AdmissionUnused is the part of the policy's admission burst no
	// registrar holds: burst mod instances.
	AdmissionUnused uint32 `json:"admission_burst_unused"`
}

// sharesJSON is every policy's per-registrar share, "default" first.
type sharesJSON struct {
	Instances uint32      `json:"instances"`
	Shares    []shareJSON `json:"per_registrar"`
}

func shareOf(name string, s config.CallerSizes, n uint32) shareJSON {
	sh := s.Share(n)
	return shareJSON{Policy: name, AdmissionBurst: sh.AdmissionBurst, AdmissionRefillIntervalMS: sh.AdmissionRefillIntervalMS,
		PredecisionRefusalBurst: sh.PredecisionRefusalBurst, PredecisionRefusalRefillIntervalMS: sh.PredecisionRefusalRefillIntervalMS,
		AdmissionUnused: s.AdmissionBurst - sh.AdmissionBurst*sh.Instances}
}

func sharesOf(r config.Registrar) *sharesJSON {
	n := max(r.Instances, 1)
	out := &sharesJSON{Instances: n, Shares: []shareJSON{shareOf(callers.DefaultName, r.DefaultSizes(), n)}}
	for _, p := range r.Callers {
		out.Shares = append(out.Shares, shareOf(p.Name, p.EnforcedSizes(), n))
	}
	return out
}

// instancesRows writes the summary's instances row, and with several
// registrars one row per policy with each registrar's share of it.
func instancesRows(row func(k, v string), s *sharesJSON) {
	if s.Instances == 1 {
		row("instances", "1 (a single registrar: it enforces every policy's whole budget)")
		return
	}
	row("instances", fmt.Sprintf("%d registrars share every policy's budget; each enforces burst / %d and one token per interval × %d:", s.Instances, s.Instances, s.Instances))
	for _, sh := range s.Shares {
		v := fmt.Sprintf("admission burst %d, one token every %d ms; predecision_refusal burst %d, one token every %d ms",
			sh.AdmissionBurst, sh.AdmissionRefillIntervalMS, sh.PredecisionRefusalBurst, sh.PredecisionRefusalRefillIntervalMS)
		if sh.AdmissionUnused > 0 {
			v += fmt.Sprintf(" (%d of the admission burst held by none: a multiple of %d divides evenly)", sh.AdmissionUnused, s.Instances)
		}
		row("  "+sh.Policy+" per registrar", v)
	}
}
