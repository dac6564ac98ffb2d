package audit_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Over-bound values whose byte 512 (the first byte past the bound) falls
// inside, or right after, a character, one per bounded field.
var (
	// 510 ASCII bytes, then a 3-byte euro sign occupying bytes 510..512:
	// it straddles the bound and is dropped; the prefix is 510 bytes.
	overCaller = strings.Repeat("c", 510) + "€" + "-rest-of-identity"
	// 600 ASCII bytes: cut exactly at 512.
	overService = strings.Repeat("s", 600)
	// 509 bytes, then a 4-byte emoji occupying 509..512: dropped; prefix 509.
	overHost = strings.Repeat("h", 509) + "😀" + "tail"
	// 511 bytes, then an invalid byte (kept: it is a one-byte character and
	// is written \ufffd), then more: prefix 512.
	overDetail = strings.Repeat("d", 511) + "\xff" + "more detail"
	// A spec.reload of 700 bytes, byte 512 inside a 2-byte character (a
	// cut that keeps 511 bytes).
	overReload = "/usr/bin/reload " + strings.Repeat("ü", 342)
	// A counted record's identity, byte 512 inside a 2-byte character.
	overLimitedCaller = "registrar-client:" + strings.Repeat("é", 300)
)

type goldenCase struct {
	name string
	rec  *audit.Record
	// chain, if set, is the line's chain value: the line as a sealed
	// store writes it (Marshal's, with the chain key last).
	chain string
}

// goldenLine is a case's line: Marshal's, chained when the case is.
func goldenLine(t testing.TB, tc goldenCase) []byte {
	line := mustMarshal(t, tc.rec)
	if tc.chain != "" {
		line = audit.WithChain(line, tc.chain)
	}
	return line
}

// sealedRec is a sealed record closing epoch 41.
func sealedRec() *audit.Record {
	return &audit.Record{Phase: audit.PhaseAdmin, TS: t0.Add(15 * time.Minute), CallerIdentity: audit.DaemonIdentity,
		Admin: &audit.Admin{Action: audit.ActionSealed, Sealed: audit.Sealed{Epoch: 41, Reason: audit.SealReasonInterval, KeyID: "5f0c2a9e11d3b7a4"}}}
}

func goldenCases() []goldenCase {
	withoutInstance := intent("AAAAAAAAAAAA.1")
	withoutInstance.TS = time.Date(2026, 8, 23, 12, 0, 0, 0, time.FixedZone("KST", 9*3600)) // whole second, non-UTC input
	withoutInstance.Verb = vocab.Deregister
	withoutInstance.Requested = &audit.Requested{ServiceName: "gateway", Host: "h2"}

	removed := outcome("AAAAAAAAAAAA.2", audit.Outcome{Class: vocab.ClassIdentityRemoved})
	removed.Verb = vocab.Deregister
	absent := outcome("AAAAAAAAAAAA.3", audit.Outcome{Class: vocab.ClassIdempotentAlreadyAbsent})
	absent.Verb = vocab.Deregister

	refusedNoDetail := outcome("AAAAAAAAAAAA.4", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonInvalidServiceName})
	refusedNoDetail.RegistrationID = "" // refused before derivation
	refusedNoDetail.Requested = &audit.Requested{ServiceName: "Bad_Name", Host: "h1"}

	refusedDetail := outcome("AAAAAAAAAAAA.5", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonBackendUnavailable, Detail: "embedded backend: bbolt: timeout"})

	truncCaller := intent("AAAAAAAAAAAA.6")
	truncCaller.CallerIdentity = overCaller
	truncService := intent("AAAAAAAAAAAA.7")
	truncService.Requested = &audit.Requested{ServiceName: overService, Host: "h1"}
	truncHost := intent("AAAAAAAAAAAA.8")
	truncHost.Requested = &audit.Requested{ServiceName: "review", Host: overHost, Instance: 7}
	truncDetail := outcome("AAAAAAAAAAAA.9", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonStoredSpecConflict, Detail: overDetail})
	truncAll := outcome("AAAAAAAAAAAA.10", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonHostMismatch, Detail: overDetail})
	truncAll.CallerIdentity = overCaller
	truncAll.Requested = &audit.Requested{ServiceName: overService, Host: overHost, Instance: 999}

	limitedTrunc := limited(vocab.Admission, 1)
	limitedTrunc.CallerIdentity = overLimitedCaller
	limitedTrunc.Verb = vocab.Deregister

	limitedPolicy := limited(vocab.Admission, 7)
	limitedPolicy.Policy = "control-plane"
	limitedShadow := limited(vocab.Admission, 12)
	limitedShadow.Policy = "agents"
	limitedShadow.Shadow = true
	adminTrunc := adminReset("unix-peer:uid=0", overLimitedCaller, []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission})
	adminTrunc.CallerIdentity = overCaller

	withSubuid := outcome("AAAAAAAAAAAA.12", audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonOutOfScope, Detail: "components"})
	withSubuid.RegistrationID = ""
	withSubuid.CallerSubuid = 100009
	withReload := intent("AAAAAAAAAAAA.12")
	withReload.Requested.Reload = "systemctl reload review.service"
	reloadFirstMint := outcome("AAAAAAAAAAAA.12", audit.Outcome{Class: vocab.ClassFirstMint})
	reloadFirstMint.Requested.Reload = withReload.Requested.Reload
	// A command is where quotes and line breaks are likeliest: escaped
	// like every other stored string.
	reloadEscaped := intent("AAAAAAAAAAAA.13")
	reloadEscaped.Requested.Reload = "sh -c \"kill -HUP $(cat /run/review.pid)\"\n\u2028\x00\xff"
	truncReload := intent("AAAAAAAAAAAA.14")
	truncReload.Requested.Reload = overReload

	// A generation deleted empty: no timestamps, nothing counted.
	rotatedEmpty := rotatedRec()
	rotatedEmpty.Admin.Rotated = audit.Rotated{File: gen1, Next: gen2, Rotation: 1,
		SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}

	// A sealed store's rotated record carries the deleted file's last
	// chain value.
	rotatedChained := rotatedRec()
	rotatedChained.Admin.Chain = "0123456789abcdef0123456789abcdef"
	sealedGenesis := sealedRec()
	sealedGenesis.Admin.Epoch, sealedGenesis.Admin.Reason = 0, audit.SealReasonStart

	escaping := intent("AAAAAAAAAAAA.11")
	escaping.CallerIdentity = "q\"b\\s/\n\r\t\x00\x1f\x7f\u2028\u2029\ufffd\xff<>&é"

	return []goldenCase{
		{"intent_with_instance", intent("AAAAAAAAAAAA.0"), ""},
		{"intent_without_instance", withoutInstance, ""},
		{"outcome_first_mint", outcome("AAAAAAAAAAAA.0", audit.Outcome{Class: vocab.ClassFirstMint}), ""},
		{"outcome_idempotent_remint", outcome("AAAAAAAAAAAA.1", audit.Outcome{Class: vocab.ClassIdempotentRemint}), ""},
		{"outcome_identity_removed", removed, ""},
		{"outcome_idempotent_already_absent", absent, ""},
		{"outcome_refused_without_detail", refusedNoDetail, ""},
		{"outcome_refused_with_detail", refusedDetail, ""},
		{"truncated_caller_identity", truncCaller, ""},
		{"truncated_requested_service_name", truncService, ""},
		{"truncated_requested_host", truncHost, ""},
		{"truncated_outcome_detail", truncDetail, ""},
		{"truncated_all_fields", truncAll, ""},
		{"limited_counted", limited(vocab.PredecisionRefusal, 42), ""},
		{"limited_truncated_caller_identity", limitedTrunc, ""},
		{"limited_policy", limitedPolicy, ""},
		{"limited_shadow", limitedShadow, ""},
		{"admin_limits_reset", adminReset("unix-peer:uid=0", "registrar-client:uri:spiffe://example.org/agent/h7",
			[]vocab.Verb{vocab.Deregister, vocab.Mint}, []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal}), ""},
		{"admin_truncated_subject_identity", adminTrunc, ""},
		{"admin_rotated", rotatedRec(), ""},
		{"admin_rotated_empty_file", rotatedEmpty, ""},
		{"escaping", escaping, ""},
		{"outcome_caller_subuid", withSubuid, ""},
		{"intent_with_reload", withReload, ""},
		{"outcome_first_mint_with_reload", reloadFirstMint, ""},
		{"reload_escaped", reloadEscaped, ""},
		{"truncated_requested_reload", truncReload, ""},
		// Lines of a sealed store: each ends with its chain value.
		{"chained_intent", intent("AAAAAAAAAAAA.0"), "d9a1b1e6a4f04c2a8e1f3b7c5d2e9f10"},
		{"chained_outcome_refused_with_detail", refusedDetail, "00112233445566778899aabbccddeeff"},
		{"chained_limited_policy", limitedPolicy, "ffeeddccbbaa99887766554433221100"},
		{"chained_truncated_all_fields", truncAll, "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f"},
		{"admin_sealed", sealedRec(), "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"},
		{"admin_sealed_genesis", sealedGenesis, "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"},
		{"admin_rotated_chained", rotatedChained, "0123456789abcdef0123456789abcdee"},
	}
}

// TestGoldenLines pins the exact bytes of every record shape. Run
// `go test ./audit -update` to rewrite the fixtures; review the diff.
func TestGoldenLines(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := goldenLine(t, tc)
			path := filepath.Join("testdata", tc.name+".jsonl")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading fixture (run with -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal bytes differ from %s\ngot:  %s\nwant: %s", path, got, want)
			}
			// The fixture is also a valid reader input, and decodes to a
			// record that re-encodes to the same bytes.
			rec, err := audit.Unmarshal(want)
			if err != nil {
				t.Fatalf("Unmarshal(fixture): %v", err)
			}
			if again := audit.Encode(rec); !bytes.Equal(again, want) {
				t.Errorf("fixture does not round-trip\ngot:  %s\nwant: %s", again, want)
			}
		})
	}
}

// TestGoldenFixturesAreAllPinned fails when a fixture exists with no case,
// so a renamed case shows up as a removed file, not a stale one.
func TestGoldenFixturesAreAllPinned(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range goldenCases() {
		names[tc.name+".jsonl"] = true
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") && !names[e.Name()] {
			t.Errorf("testdata/%s has no golden case", e.Name())
		}
	}
}
