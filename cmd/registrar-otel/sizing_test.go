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
		Mints   uint64  `json:"mints"`
		Burst   uint32  `json:"rate_limit_admission_burst"`
		Covered bool    `json:"covered"`
		Extra   float64 `json:"extra_seconds"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// (2400 − 2000) × 250 / 1000 = 100 s.
	if got.Mints != 2400 || got.Burst != 2000 || got.Covered || got.Extra != 100 {
		t.Fatalf("sizing --json %+v, want 2400 mints over a burst of 2000, 100 s extra", got)
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
