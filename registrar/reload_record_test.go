package registrar_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// TestAMintsRecordsCarryItsSpecReload: what a caller asks the host to run
// is in its mint's intent and outcome records (refused ones too), a mint
// without one writes no reload, and a deregister never does.
func TestAMintsRecordsCarryItsSpecReload(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.NewBackend(t))
	ctx := context.Background()

	withReload := goodMint()
	if _, err := h.v.Mint(ctx, withReload); err != nil {
		t.Fatal(err)
	}
	refused := goodMint()
	refused.Host = "h1.example.com" // invalid_host, before derivation
	refused.Spec.Reload = "kill -HUP 1"
	if _, err := h.v.Mint(ctx, refused); err == nil {
		t.Fatal("a mint of host h1.example.com was answered; want invalid_host")
	}
	noReload := goodMint()
	noReload.Instance, noReload.Spec.Reload = 8, ""
	if _, err := h.v.Mint(ctx, noReload); err != nil {
		t.Fatal(err)
	}
	if _, err := h.v.Deregister(ctx, goodDeregister()); err != nil {
		t.Fatal(err)
	}

	want := []string{withReload.Spec.Reload, refused.Spec.Reload, "", ""} // per invocation
	recs := h.log.Records()
	if len(recs) != 2*len(want) {
		t.Fatalf("%d records for %d invocations, want %d", len(recs), len(want), 2*len(want))
	}
	for i, r := range recs {
		if got := r.Requested.Reload; got != want[i/2] {
			t.Errorf("record %d (%s %s): requested.reload = %q, want %q", i, r.Verb, r.Phase, got, want[i/2])
		}
	}
}

// TestAMintsIntentLineCarriesItsSpecReloadBoundedAndEscaped: through the
// real store, a hostile spec.reload stays one line, escaped, cut to the
// field bound with the complete value's digest.
func TestAMintsIntentLineCarriesItsSpecReloadBoundedAndEscaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	store, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 8, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 8, RefillInterval: time.Second},
		Now:                func() limiter.Instant { return 0 },
	}, counting.New())
	if err != nil {
		t.Fatal(err)
	}
	v, err := registrar.New(registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 1800}, registrar.Deps{
		Limiter: lim, Audit: store, Backend: registrartest.NewBackend(t),
		Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	reload := "sh -c \"kill -HUP 1\"\n{\"phase\":\"outcome\"}\n" + strings.Repeat("x", 700)
	req := goodMint()
	req.Spec.Reload = reload
	if _, err := v.Mint(context.Background(), req); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(dir, audit.ActiveFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, audit.MaxRecordBytes)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 {
		t.Fatalf("the store holds %d lines, want 2 (an intent, an outcome): a reload broke a line", len(lines))
	}
	sum := sha256.Sum256([]byte(reload))
	for i, line := range lines {
		r, err := audit.Unmarshal([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if r.Requested.Reload != reload[:audit.MaxFieldBytes] {
			t.Errorf("line %d: requested.reload is %d bytes, want the first %d of the spec's", i+1, len(r.Requested.Reload), audit.MaxFieldBytes)
		}
		tr, ok := r.Truncated[audit.PathRequestedReload]
		if !ok || tr.FullSHA256 != hex.EncodeToString(sum[:]) || tr.FullBytes != uint64(len(reload)) {
			t.Errorf("line %d: truncated[requested.reload] = %+v, %v; want the complete reload's digest and %d bytes", i+1, tr, ok, len(reload))
		}
	}
	if !strings.Contains(lines[0], `"phase":"intent"`) || !strings.Contains(lines[0], `"reload":"sh -c \"kill -HUP 1\"\n{\"phase\":\"outcome\"}\nxxx`) {
		t.Errorf("the intent line does not carry the reload escaped: %s", lines[0][:200])
	}
	if r, _ := audit.Unmarshal([]byte(lines[0])); r == nil || r.Verb != vocab.Mint {
		t.Error("the first line is not the mint's record")
	}
}

// TestAMintWhoseIntentRetentionHoldsIsBusy: while the store keeps files
// younger than audit_min_retention_seconds past its budget it refuses a
// mint's intent, and the mint, a refused one included, is answered
// RegistrarBusy with the store's retry-after: nothing written, nothing
// created.
func TestAMintWhoseIntentRetentionHoldsIsBusy(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.log.FailPhase(audit.PhaseIntent, &audit.RetentionHeldError{HeldFiles: 2, RetryAfter: 90*time.Second + 400*time.Millisecond})
	bad := goodMint()
	bad.Host = "H1" // a pre-derivation refusal writes an intent too
	for _, req := range []registrar.MintRequest{goodMint(), bad} {
		_, err := h.v.Mint(context.Background(), req)
		thr := errorAs[*registrar.ThrottledError](t, err)
		if thr.RetryAfterSeconds != 90 || thr.RequestID == "" {
			t.Errorf("mint of %s: %+v, want RegistrarBusy retryable after 90 s", req.Host, thr)
		}
	}
	if b.Calls() != 0 || h.log.Len() != 0 {
		t.Errorf("%d backend calls and %d records, want none", b.Calls(), h.log.Len())
	}
	h.log.FailPhase(audit.PhaseIntent, &audit.RetentionHeldError{HeldFiles: 1})
	_, err := h.v.Mint(context.Background(), goodMint())
	if thr := errorAs[*registrar.ThrottledError](t, err); thr.RetryAfterSeconds != 1 {
		t.Errorf("a retry-after under a second is advertised as %d s, want 1", thr.RetryAfterSeconds)
	}
}
