package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSizingRunsTheOperatorsNumbersThroughTheFormula(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--wave-hosts", "64", "--modules-per-host", "8"}, []string{
			"64 hosts × 8 modules per host = 512 mints", "burst 512, one token per 500 ms (embedded defaults)",
			"covered:          yes", "burst needed:     512", "extra time:       0 s"}},
		{[]string{"--wave-hosts", "200", "--modules-per-host", "8"}, []string{
			"= 1600 mints", "covered:          no, 1088 mints wait", "burst needed:     1600",
			"extra time:       544 s = (1600 − 512) × 500 ms / 1000", "set rate_limit_admission_burst = 1600"}},
		{[]string{"--wave-hosts", "1", "--modules-per-host", "513"}, []string{"extra time:       0.5 s"}},
	} {
		var out, errOut bytes.Buffer
		if code := runSizing(tc.args, &out, &errOut); code != 0 {
			t.Fatalf("sizing %v: exit %d, %s", tc.args, code, errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("sizing %v output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
}

func TestSizingReadsTheConfiguredBucket(t *testing.T) {
	cfg := writeConfigForCheck(t, "[registrar]\nrate_limit_admission_burst = 2000\nrate_limit_admission_refill_interval_ms = 250\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n")
	var out, errOut bytes.Buffer
	if code := runSizing([]string{"--wave-hosts", "300", "--modules-per-host", "8", "--config", cfg, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		Policy  string  `json:"policy"`
		Mints   uint64  `json:"mints"`
		Burst   uint32  `json:"rate_limit_admission_burst"`
		Covered bool    `json:"covered"`
		Extra   float64 `json:"extra_seconds"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// (2400 − 2000) × 250 / 1000 = 100 s.
	if got.Mints != 2400 || got.Burst != 2000 || got.Covered || got.Extra != 100 || got.Policy != "default" {
		t.Fatalf("sizing --json %+v, want 2400 mints over a burst of 2000, 100 s extra", got)
	}
}

// sizingPolicies is a configuration with a small default and two caller
// policies, one setting only the burst.
const sizingPolicies = `[registrar]
rate_limit_admission_burst = 8
[registrar.callers.control-plane]
identities = ["unix-peer:uid=0"]
rate_limit_admission_burst = 1600
rate_limit_admission_refill_interval_ms = 100
[registrar.callers.agents]
identity_prefixes = ["registrar-client:dns:"]
rate_limit_admission_burst = 4
[registrar.components.review]
multiplicity = "many-per-host"
`

// TestSizingSizesOnePolicysBucket: --policy runs the wave through the
// named policy's enforced sizes (a size it does not set being the
// default's), and names the policy's key in the verdict and the advice;
// --policy default and no --policy are the [registrar] table's bucket.
func TestSizingSizesOnePolicysBucket(t *testing.T) {
	cfg := writeConfigForCheck(t, sizingPolicies)
	for _, tc := range []struct {
		policy []string
		want   []string
	}{
		{[]string{"--policy", "control-plane"}, []string{
			"admission bucket: burst 1600, one token per 100 ms (policy control-plane, " + cfg + ")",
			"covered:          yes", "burst needed:     1600 (registrar.callers.control-plane.rate_limit_admission_burst)"}},
		{[]string{"--policy=agents"}, []string{
			"admission bucket: burst 4, one token per 500 ms (policy agents, " + cfg + ")", // the default's interval
			"extra time:       798 s = (1600 − 4) × 500 ms / 1000",
			"burst needed:     1600 (registrar.callers.agents.rate_limit_admission_burst)",
			"advice:           set registrar.callers.agents.rate_limit_admission_burst = 1600 before the bring-up"}},
		{[]string{"--policy", "default"}, []string{
			"admission bucket: burst 8, one token per 500 ms (policy default, " + cfg + ")",
			"burst needed:     1600 (registrar.rate_limit_admission_burst)",
			"advice:           set rate_limit_admission_burst = 1600 before the bring-up"}},
		{nil, []string{
			"admission bucket: burst 8, one token per 500 ms (" + cfg + ")",
			"advice:           set rate_limit_admission_burst = 1600 before the bring-up"}},
	} {
		args := append([]string{"--wave-hosts", "200", "--modules-per-host", "8", "--config", cfg}, tc.policy...)
		var out, errOut bytes.Buffer
		if code := runSizing(args, &out, &errOut); code != 0 {
			t.Fatalf("sizing %v: exit %d, %s", tc.policy, code, errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("sizing %v output lacks %q:\n%s", tc.policy, w, out.String())
			}
		}
	}

	var out, errOut bytes.Buffer
	if code := runSizing([]string{"--wave-hosts", "200", "--modules-per-host", "8", "--config", cfg, "--policy", "control-plane", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got sizingJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Policy != "control-plane" || got.Burst != 1600 || got.RefillIntervalMS != 100 || !got.Covered {
		t.Errorf("sizing --policy control-plane --json = %+v, want the policy's burst 1600 every 100 ms, covered", got)
	}
}

func TestSizingRefusesAPolicyTheConfigurationLacks(t *testing.T) {
	for _, tc := range []struct {
		doc, policy, want string
	}{
		{sizingPolicies, "control", `has no caller policy "control"; it has agents, control-plane and default (the [registrar] table's)`},
		{"", "agents", `has no caller policy "agents"; it has none but default (the [registrar] table's)`},
		{sizingPolicies, "", "--policy needs a policy name; omit it to size the [registrar] table's bucket (policy default)"},
	} {
		cfg := writeConfigForCheck(t, tc.doc)
		var out, errOut bytes.Buffer
		code := runSizing([]string{"--wave-hosts", "1", "--modules-per-host", "1", "--config", cfg, "--policy=" + tc.policy}, &out, &errOut)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("sizing --policy=%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.policy, code, out.String(), errOut.String(), tc.want)
		}
	}
}

func TestSizingUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--wave-hosts", "0", "--modules-per-host", "8"},
		{"--wave-hosts", "-1", "--modules-per-host", "8"},
		{"--wave-hosts", "64", "--modules-per-host", "8", "extra"},
		{"--wave-hosts", "64", "--modules-per-host", "8", "--config", "/nonexistent/registrar.toml"},
	} {
		var out, errOut bytes.Buffer
		if code := runSizing(args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("sizing %v: exit %d with stderr %q, want 2 and a message", args, code, errOut.String())
		}
	}
}

func TestGoldenSizingJSON(t *testing.T) {
	for _, tc := range []struct {
		hosts, modules string
		file           string
	}{
		{"64", "8", "sizing_covered.json"},
		{"200", "8", "sizing_uncovered.json"},
		{"1", "513", "sizing_fraction.json"},
	} {
		code, out, errOut := runDispatch("sizing", "--wave-hosts", tc.hosts, "--modules-per-host", tc.modules, "--json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		golden(t, tc.file, []byte(out))
	}
}

// TestSizingDividesTheBucketAmongTheRegistrars: with registrar.instances
// the wave is sized against each registrar's share, the busiest taking
// ⌈mints / N⌉; the operator's numbers, 200 hosts × 8 over two registrars.
func TestSizingDividesTheBucketAmongTheRegistrars(t *testing.T) {
	cfg := writeConfigForCheck(t, "[registrar]\ninstances = 2\nrate_limit_admission_burst = 1025\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n")
	var out, errOut bytes.Buffer
	if code := runSizing([]string{"--wave-hosts", "200", "--modules-per-host", "8", "--config", cfg}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, w := range []string{
		"registrars:       2 share it (registrar.instances): each burst 512 = 1025 / 2, one token per 1000 ms, and up to 800 mints",
		"covered:          no, 288 mints wait for tokens on the busiest registrar",
		"burst needed:     1600 = 800 per registrar × 2 (registrar.rate_limit_admission_burst)",
		"extra time:       288 s = (800 − 512) × 1000 ms / 1000 on the busiest registrar",
		"set rate_limit_admission_burst = 1600",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("sizing with two registrars lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	if code := runSizing([]string{"--wave-hosts", "200", "--modules-per-host", "8", "--config", cfg, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got sizingJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Instances != 2 || got.PerInstanceBurst != 512 || got.PerInstanceIntervalMS != 1000 || got.PerInstanceMints != 800 || got.ExtraMillis != 288_000 || got.BurstNeeded != 1600 {
		t.Errorf("sizing --json with two registrars: %+v", got)
	}
}
