package daemon

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// sealStateDir creates the sealing key in cfg's state directory, as
// `audit seal init` does, and returns the verification key.
func sealStateDir(t *testing.T, stateDir string) [audit.SealKeyBytes]byte {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v, _, err := audit.CreateSealKey(d, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := audit.ParseVerificationKey(v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestASealedDaemonChainsItsRecordsAndLogsTheHead: with a key file in
// the state directory the daemon seals its store, exports the seal's
// metrics, logs the head on a tick where it changed (even with the log
// level at error: the line is evidence), and at stop; the store verifies
// with the key and the logged heads.
func TestASealedDaemonChainsItsRecordsAndLogsTheHead(t *testing.T) {
	cfg := riskConfig(t)
	cfg.Registrar.LogLevel = slog.LevelError
	key := sealStateDir(t, cfg.Registrar.StateDir)
	r, logs := startLogged(t, cfg, seams{})
	r.mustMint(t)
	r.tick()
	r.tick() // nothing changed: no second line
	if got := logs.Lines(`msg="audit seal head"`); len(got) != 1 {
		t.Fatalf("head lines after a mint and two ticks: %q", got)
	}
	if e := r.metric(t, "registrar_audit_seal_epoch"); e != 1 {
		t.Errorf("registrar_audit_seal_epoch = %v, want 1 (the start seal closed epoch 0)", e)
	}
	if v := r.metric(t, "registrar_audit_seal_last_seal_timestamp_seconds"); v <= 0 {
		t.Errorf("registrar_audit_seal_last_seal_timestamp_seconds = %v", v)
	}
	r.mustMint(t)
	r.stop(t)
	heads := logs.Lines(`msg="audit seal head"`)
	if len(heads) != 2 {
		t.Fatalf("head lines after the stop: %q, want the tick's and the stop seal's", heads)
	}
	hs, err := audit.ReadHeads(strings.NewReader(strings.Join(heads, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: cfg.Registrar.AuditRecordDir, Key: &key, Heads: hs})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Seal.ChainStart != "genesis" || rep.Seal.HeadsChecked != 1 || rep.Seal.UnsealedTail != 0 {
		t.Fatalf("verify: %+v, %+v", rep.Problems, rep.Seal)
	}
}

// TestAnUnsealedDaemonExportsNoSeal: without a key file nothing of the
// seal shows.
func TestAnUnsealedDaemonExportsNoSeal(t *testing.T) {
	cfg := riskConfig(t)
	r, logs := startLogged(t, cfg, seams{})
	r.mustMint(t)
	r.tick()
	if _, ok, _ := r.sample(t, "registrar_audit_seal_epoch"); ok {
		t.Error("registrar_audit_seal_epoch exported by a daemon that does not seal")
	}
	if got := logs.Lines(`audit seal head`); len(got) != 0 {
		t.Errorf("head lines: %q", got)
	}
}

// TestAnUntrustworthyKeyFileIsASetupError: a damaged key file stops the
// start, naming it.
func TestAnUntrustworthyKeyFileIsASetupError(t *testing.T) {
	cfg := riskConfig(t)
	sealStateDir(t, cfg.Registrar.StateDir)
	path := filepath.Join(cfg.Registrar.StateDir, audit.SealKeyFileName)
	b, _ := os.ReadFile(path)
	b[20] ^= 0xff
	os.WriteFile(path, b, 0o600)
	_, err := New(cfg, nil)
	if !IsSetupError(err) || !strings.Contains(err.Error(), "audit sealing key (registrar.state_dir "+cfg.Registrar.StateDir+")") || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("New: %v, want a setup error naming the key file", err)
	}
}
