package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const checkToken = "hvs.config-check-token-never-printed"

func openbaoConfig(t *testing.T, tokenMode os.FileMode, caPEM string) string {
	t.Helper()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte(checkToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tok, tokenMode); err != nil {
		t.Fatal(err)
	}
	doc := "[registrar]\nbackend = \"openbao\"\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n" +
		"[openbao]\naddress = \"https://openbao.internal:8200\"\ntoken_file = \"" + tok + "\"\n"
	if caPEM != "" {
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, []byte(caPEM), 0o644); err != nil {
			t.Fatal(err)
		}
		doc += "ca_file = \"" + ca + "\"\n"
	}
	return writeConfigForCheck(t, doc)
}

func TestConfigCheckVerifiesTheOpenBaoTokenFileMode(t *testing.T) {
	code, stdout, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o644, "")}, nil)
	if code != configCheckInvalid {
		t.Fatalf("exit status = %d, want %d; stdout:\n%s", code, configCheckInvalid, stdout)
	}
	if !strings.Contains(stderr, "openbao.token_file must be readable by its owner only (chmod 0600), but has mode 0644") {
		t.Errorf("stderr:\n%s\nwant the token file's mode named", stderr)
	}
	if strings.Contains(stdout+stderr, checkToken) {
		t.Errorf("config check printed the token:\n%s%s", stdout, stderr)
	}
}

func TestConfigCheckVerifiesTheOpenBaoCA(t *testing.T) {
	code, _, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o600, "not a certificate\n")}, nil)
	if code != configCheckInvalid || !strings.Contains(stderr, "openbao.ca_file must be a PEM file holding at least one CA certificate") {
		t.Errorf("exit status %d, stderr:\n%s\nwant the CA refused", code, stderr)
	}
}

func TestConfigCheckSummarisesTheOpenBaoBackendWithoutTheToken(t *testing.T) {
	code, stdout, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o600, "")}, []string{"BAO_TOKEN=" + checkToken})
	if code != configCheckOK {
		t.Fatalf("exit status = %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		`openbao (registrar.backend = "openbao"):`,
		"address          https://openbao.internal:8200",
		"ca_file          (none: the system roots)",
		"token            from openbao.token_file",
		"bindings         secret/data/registrar-otel/bindings/<registration_id> (KV v2)",
		"roles            auth/approle/role/bootroot-service-<registration_id>",
		"secret ids       ttl 3600 s, 1 use(s)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout:\n%s\nlacks %q", stdout, want)
		}
	}
	if strings.Contains(stdout+stderr, checkToken) {
		t.Errorf("config check printed the token:\n%s%s", stdout, stderr)
	}
}

func TestConfigCheckNamesTheMissingOpenBaoToken(t *testing.T) {
	path := writeConfigForCheck(t, "[registrar]\nbackend = \"openbao\"\n[openbao]\naddress = \"http://127.0.0.1:8200\"\n")
	code, _, stderr := configCheckOutput([]string{"--config", path}, []string{"HOME=/nonexistent"})
	if code != configCheckInvalid || !strings.Contains(stderr, "openbao.token_file is required when registrar.backend is \"openbao\" and neither BAO_TOKEN nor VAULT_TOKEN is set") {
		t.Errorf("exit status %d, stderr:\n%s", code, stderr)
	}
}
