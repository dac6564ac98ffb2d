package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testToken = "hvs.test-token-value-that-must-never-be-printed"

func keyOf(t *testing.T, err error) string {
	t.Helper()
	var ke *KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("error %v is %T, want *KeyError", err, err)
	}
	return ke.Key
}

func TestTheBackendDefaultsToEmbeddedWithTheDocumentedOpenBaoDefaults(t *testing.T) {
	cfg := Default()
	if cfg.Registrar.Backend != BackendEmbedded {
		t.Errorf("registrar.backend = %q, want %q", cfg.Registrar.Backend, BackendEmbedded)
	}
	want := OpenBao{KVMount: "secret", KVPrefix: "registrar-otel", AppRoleMount: "approle", RequestTimeoutMS: 5000, ReadinessGraceMS: 10000, MaxInFlight: 16, SecretIDTTLSeconds: 3600, SecretIDNumUses: 1}
	if cfg.OpenBao != want {
		t.Errorf("[openbao] defaults = %+v, want %+v", cfg.OpenBao, want)
	}
	if _, err := cfg.CheckFiles(nil); err != nil {
		t.Errorf("CheckFiles on the embedded backend = %v, want nil (nothing to check)", err)
	}
}

func TestOpenBaoKeysLoadFromTheEnvironment(t *testing.T) {
	cfg := mustLoadBytes(t, "",
		"REGISTRAR_OTEL_REGISTRAR__BACKEND=openbao",
		"REGISTRAR_OTEL_OPENBAO__ADDRESS=http://127.0.0.1:8200",
		"REGISTRAR_OTEL_OPENBAO__REQUEST_TIMEOUT_MS=750",
		"REGISTRAR_OTEL_OPENBAO__SECRET_ID_NUM_USES=2")
	o := cfg.OpenBao
	if cfg.Registrar.Backend != BackendOpenBao || o.Address != "http://127.0.0.1:8200" || o.RequestTimeoutMS != 750 || o.SecretIDNumUses != 2 {
		t.Errorf("loaded %+v backend %q, want the environment's values", o, cfg.Registrar.Backend)
	}
}

func TestATokenInTheEnvironmentOverridesIsRefusedWithoutRepeatingIt(t *testing.T) {
	msg := loadErrors(t, "", "REGISTRAR_OTEL_OPENBAO__TOKEN="+testToken)
	if strings.Contains(msg, testToken) {
		t.Fatalf("the error repeats the token: %s", msg)
	}
	want := "openbao.token " + ruleInlineToken + " (from environment variable REGISTRAR_OTEL_OPENBAO__TOKEN)\n"
	if msg != want {
		t.Errorf("got %q, want %q", msg, want)
	}
}

func TestUnknownOpenBaoKeysAreWarnedNotRejected(t *testing.T) {
	cfg := mustLoadBytes(t, "[openbao]\nnamespace = \"team-a\"\n")
	if cfg.OpenBao != Default().OpenBao {
		t.Errorf("an unknown key changed the table: %+v", cfg.OpenBao)
	}
}

func TestCheckOpenBaoAddress(t *testing.T) {
	acceptsExactly(t, "checkOpenBaoAddress", func(v string) bool { return checkOpenBaoAddress(v) == nil },
		[]string{"https://openbao.internal:8200", "https://openbao.internal", "https://openbao.internal/", "http://127.0.0.1:8200", "http://[::1]:8200", "http://localhost:8200"},
		[]string{"http://10.0.0.5:8200", "https://openbao.internal/v1", "https://openbao.internal?x=1", "https://u:p@openbao.internal", "openbao.internal:8200", "unix:///run/openbao.sock", "https://"})
}

func TestReadTokenFromAnOwnerOnlyFile(t *testing.T) {
	for _, mode := range []os.FileMode{0o600, 0o400} {
		path := writeFile(t, "token", "  "+testToken+"\n", mode)
		o := OpenBao{TokenFile: path}
		tok, src, err := o.ReadToken([]string{"BAO_TOKEN=from-env"})
		if err != nil {
			t.Fatalf("mode %#o: %v", mode, err)
		}
		if tok != testToken {
			t.Errorf("mode %#o: token = %q, want the file's, trimmed", mode, tok)
		}
		if src.File != path || strings.Contains(src.String(), testToken) {
			t.Errorf("source = %v, want the file and never the token", src)
		}
	}
}

func TestReadTokenRefusesAFileOthersCanRead(t *testing.T) {
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660, 0o666} {
		path := writeFile(t, "token", testToken, mode)
		o := OpenBao{TokenFile: path}
		_, _, err := o.ReadToken(nil)
		if err == nil {
			t.Fatalf("mode %#o accepted", mode)
		}
		if keyOf(t, err) != "openbao.token_file" || !strings.Contains(err.Error(), "chmod 0600") || strings.Contains(err.Error(), testToken) {
			t.Errorf("mode %#o: error %q, want one naming openbao.token_file and chmod 0600, without the token", mode, err)
		}
	}
}

func TestReadTokenRefusesBadTokenFiles(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"missing":  filepath.Join(dir, "absent"),
		"empty":    writeFile(t, "empty", "\n", 0o600),
		"spaces":   writeFile(t, "two", testToken+" second-token", 0o600),
		"too big":  writeFile(t, "big", strings.Repeat("a", MaxTokenFileBytes+1), 0o600),
		"a folder": dir,
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := (&OpenBao{TokenFile: path}).ReadToken([]string{"BAO_TOKEN=" + testToken})
			if err == nil {
				t.Fatal("accepted; a bad file must not fall back to the environment")
			}
			if keyOf(t, err) != "openbao.token_file" || strings.Contains(err.Error(), testToken) {
				t.Errorf("error %q, want one naming openbao.token_file, without the token", err)
			}
		})
	}
}

func TestReadTokenFromTheEnvironmentPrefersBaoToken(t *testing.T) {
	var o OpenBao
	tok, src, err := o.ReadToken([]string{"VAULT_TOKEN=vault-one", "BAO_TOKEN=bao-one"})
	if err != nil || tok != "bao-one" || src.EnvVar != EnvBaoToken {
		t.Errorf("got %q from %v (%v), want bao-one from BAO_TOKEN", tok, src, err)
	}
	tok, src, err = o.ReadToken([]string{"VAULT_TOKEN=vault-one"})
	if err != nil || tok != "vault-one" || src.EnvVar != EnvVaultToken {
		t.Errorf("got %q from %v (%v), want vault-one from VAULT_TOKEN", tok, src, err)
	}
	if _, _, err := o.ReadToken([]string{"BAO_TOKEN="}); err == nil || keyOf(t, err) != EnvBaoToken {
		t.Errorf("an empty BAO_TOKEN: error %v, want one naming BAO_TOKEN", err)
	}
	_, _, err = o.ReadToken([]string{"HOME=/root"})
	if err == nil || keyOf(t, err) != "openbao.token_file" || !strings.Contains(err.Error(), "BAO_TOKEN nor VAULT_TOKEN") {
		t.Errorf("no token anywhere: error %v, want openbao.token_file is required …", err)
	}
}

func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<32, 0), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestCheckFilesVerifiesTheTokenAndTheCA(t *testing.T) {
	good := writeFile(t, "token", testToken, 0o600)
	ca := writeFile(t, "ca.pem", selfSignedPEM(t), 0o644)
	notPEM := writeFile(t, "ca.txt", "not a certificate\n", 0o644)
	cfg := Default()
	cfg.Registrar.Backend = BackendOpenBao
	cfg.OpenBao.Address = "https://openbao.internal:8200"
	cfg.OpenBao.TokenFile, cfg.OpenBao.CAFile = good, ca
	if src, err := cfg.CheckFiles(nil); err != nil || src.File != good {
		t.Fatalf("CheckFiles = %v, %v; want nil from the token file", src, err)
	}
	cfg.OpenBao.CAFile = notPEM
	cfg.OpenBao.TokenFile = writeFile(t, "token2", testToken, 0o644)
	_, err := cfg.CheckFiles(nil)
	got := errorLines(err)
	for _, want := range []string{"openbao.token_file must be readable by its owner only", "openbao.ca_file must be a PEM file holding at least one CA certificate"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckFiles errors:\n%s\nwant one containing %q", got, want)
		}
	}
	if strings.Contains(got, testToken) {
		t.Errorf("CheckFiles errors repeat the token:\n%s", got)
	}
}
