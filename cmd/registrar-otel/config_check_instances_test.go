package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigCheckShowsEachRegistrarsShare: with registrar.instances,
// config check lists each registrar's share of every policy (and the
// remainder no registrar holds), and the service.instance.id serve would
// export with where it comes from; OTEL_RESOURCE_ATTRIBUTES gives it when
// the key does not.
func TestConfigCheckShowsEachRegistrarsShare(t *testing.T) {
	cfg := writeConfigForCheck(t, `[registrar]
instances = 2
rate_limit_admission_burst = 5
[registrar.components.review]
multiplicity = "many-per-host"
[registrar.callers.ci]
identities = ["registrar-client:dns:ci.example.net"]
rate_limit_admission_burst = 8
rate_limit_admission_refill_interval_ms = 250
`)
	env := []string{"OTEL_RESOURCE_ATTRIBUTES=service.instance.id=registrar-b"}
	code, out, errOut := configCheckOutput([]string{"--config", cfg}, env)
	if code != configCheckOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"instances                   2 registrars share every policy's budget; each enforces burst / 2 and one token per interval × 2:",
		"default per registrar     admission burst 2, one token every 1000 ms; predecision_refusal burst 16, one token every 2000 ms (1 of the admission burst held by none: a multiple of 2 divides evenly)",
		"ci per registrar          admission burst 4, one token every 500 ms; predecision_refusal burst 16, one token every 2000 ms\n",
		"service_instance_id       registrar-b (OTEL_RESOURCE_ATTRIBUTES)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = configCheckOutput([]string{"--config", cfg, "--json"}, env)
	if code != configCheckOK {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	var got checkResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.ServiceInstance == nil || got.ServiceInstance.ID != "registrar-b" || got.ServiceInstance.From != "OTEL_RESOURCE_ATTRIBUTES" {
		t.Errorf("service_instance = %+v", got.ServiceInstance)
	}
	want := []shareJSON{
		{Policy: "default", AdmissionBurst: 2, AdmissionRefillIntervalMS: 1000, PredecisionRefusalBurst: 16, PredecisionRefusalRefillIntervalMS: 2000, AdmissionUnused: 1},
		{Policy: "ci", AdmissionBurst: 4, AdmissionRefillIntervalMS: 500, PredecisionRefusalBurst: 16, PredecisionRefusalRefillIntervalMS: 2000},
	}
	if got.Shares == nil || got.Shares.Instances != 2 || len(got.Shares.Shares) != 2 || got.Shares.Shares[0] != want[0] || got.Shares.Shares[1] != want[1] {
		t.Errorf("instance_shares = %+v, want 2 instances and %+v", got.Shares, want)
	}
}

// TestConfigCheckRefusesABurstTheRegistrarsWouldDivideToZero: the named
// error reaches config check's output and exit status.
func TestConfigCheckRefusesABurstTheRegistrarsWouldDivideToZero(t *testing.T) {
	cfg := writeConfigForCheck(t, "[registrar]\ninstances = 4\nrate_limit_predecision_refusal_burst = 3\n")
	code, _, errOut := configCheckOutput([]string{"--config", cfg}, nil)
	if code != configCheckInvalid || !strings.Contains(errOut, "registrar.rate_limit_predecision_refusal_burst must be at least registrar.instances (4)") {
		t.Errorf("exit %d, stderr %s; want the named error", code, errOut)
	}
}
