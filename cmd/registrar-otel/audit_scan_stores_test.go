package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// storeAnswer is one invocation of registration h1-review-<instance>
// written to a store: its intent at base+at and, unless class is 0, its
// outcome 100 ms later.
type storeAnswer struct {
	at       time.Duration
	instance uint32
	class    vocab.OutcomeClass
}

// twoRegistrarStores writes two stores (registrars "a" and "b" sharing a
// registry) that are each clean alone and, together, show every
// cross-store finding once, and one intent another daemon settled.
func twoRegistrarStores(t *testing.T, base time.Time) (a, b string) {
	t.Helper()
	const (
		fm = vocab.ClassFirstMint
		rm = vocab.ClassIdempotentRemint
		rv = vocab.ClassIdentityRemoved
		aa = vocab.ClassIdempotentAlreadyAbsent
	)
	s := time.Second
	write := func(name string, as ...storeAnswer) string {
		dir := filepath.Join(t.TempDir(), name)
		at := base
		st, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for i, x := range as {
			id := fmt.Sprintf("%s.%d", strings.ToUpper(name), i)
			verb := vocab.Mint
			if x.class == rv || x.class == aa {
				verb = vocab.Deregister
			}
			in := &audit.Record{Phase: audit.PhaseIntent, RequestID: id, Verb: verb, CallerIdentity: "registrar-client:dns:deployer.example.net",
				Requested: &audit.Requested{ServiceName: "review", Host: "h1", Instance: x.instance}}
			at = base.Add(x.at)
			if err := st.Append(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if x.class == 0 {
				continue
			}
			out := *in
			out.Phase, out.Outcome = audit.PhaseOutcome, &audit.Outcome{Class: x.class}
			out.RegistrationID = fmt.Sprintf("h1-review-%03d", x.instance)
			at = base.Add(x.at + 100*time.Millisecond)
			if err := st.Append(context.Background(), &out); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	a = write("a",
		storeAnswer{0, 1, fm},      // 1: duplicate_first_mint with b's
		storeAnswer{0, 2, fm},      // 2: removed here, reminted by b
		storeAnswer{10 * s, 2, rv}, //
		storeAnswer{0, 3, fm},      // 3: b says already_absent
		storeAnswer{20 * s, 4, rv}, // 4: b removed it already
		storeAnswer{30 * s, 5, 0},  // 5: no outcome, nothing after
		storeAnswer{0, 6, 0},       // 6: no outcome, b minted it after
	)
	b = write("b",
		storeAnswer{10 * s, 1, fm},
		storeAnswer{20 * s, 2, rm},
		storeAnswer{10 * s, 3, aa},
		storeAnswer{0, 4, fm},
		storeAnswer{10 * s, 4, rv},
		storeAnswer{10 * s, 6, fm},
	)
	return a, b
}

// TestGoldenAuditScanOfTwoStores holds both forms of `audit scan --dir A
// --dir B` over two registrars' stores, each clean alone: every
// cross-store finding, named, with both answers located.
func TestGoldenAuditScanOfTwoStores(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := twoRegistrarStores(t, base)
	dirs := []string{a, b}
	m, err := audit.ScanStores(context.Background(), audit.ScanOptions{Now: base.Add(time.Hour)}, dirs)
	if err != nil {
		t.Fatal(err)
	}
	views := []scanView{{rep: m.Stores[0]}, {rep: m.Stores[1]}}
	norm := func(s string) []byte {
		return []byte(strings.NewReplacer(a, "$DIR_A", b, "$DIR_B").Replace(s))
	}
	var js, txt bytes.Buffer
	if err := writeJSON(&js, storesJSONOf(m, dirs, views, nil)); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan_stores.json", norm(js.String()))
	if err := writeStoresText(&txt, m, dirs, views, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan_stores.txt", norm(txt.String()))

	var got storesJSON
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Anomalies || got.Stores[0].IntentWithoutOutcome != 2 || got.Stores[1].Anomalies || got.CrossStore.SettledElsewhere != 1 {
		t.Errorf("anomalies %v, store a %v (%d unpaired), settled %d", got.Anomalies, got.Stores[0].Anomalies, got.Stores[0].IntentWithoutOutcome, got.CrossStore.SettledElsewhere)
	}
	for _, k := range audit.CrossKinds {
		if got.CrossStore.ByKind[string(k)] != 1 {
			t.Errorf("%s: %d findings, want exactly 1", k, got.CrossStore.ByKind[string(k)])
		}
	}
}

// TestAuditScanOfTwoStoresExitsOnAFindingEachAloneIsClean: through the
// command, two stores each clean alone (exit 0) exit 1 together when they
// hold two first mints of one registration.
func TestAuditScanOfTwoStoresExitsOnAFindingEachAloneIsClean(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	dirOf := func(as ...storeAnswer) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "audit")
		at := base
		st, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for i, x := range as {
			id := fmt.Sprintf("R%d", i)
			r := &audit.Record{Phase: audit.PhaseIntent, RequestID: id, Verb: vocab.Mint, CallerIdentity: "unix-peer:uid=1000",
				Requested: &audit.Requested{ServiceName: "review", Host: "h1", Instance: x.instance}}
			at = base.Add(x.at)
			st.Append(context.Background(), r)
			o := *r
			o.Phase, o.Outcome, o.RegistrationID = audit.PhaseOutcome, &audit.Outcome{Class: x.class}, "h1-review-001"
			st.Append(context.Background(), &o)
		}
		return dir
	}
	a := dirOf(storeAnswer{0, 1, vocab.ClassFirstMint})
	b := dirOf(storeAnswer{10 * time.Second, 1, vocab.ClassFirstMint})
	for _, d := range []string{a, b} {
		if code, out, _ := auditScanOutput("--dir", d); code != auditScanClean {
			t.Fatalf("%s alone: exit %d, want 0\n%s", d, code, out)
		}
	}
	code, out, errOut := auditScanOutput("--dir", a, "--dir", b)
	if code != auditScanAnomalies || !strings.Contains(out, "duplicate_first_mint h1-review-001") || !strings.Contains(out, "result: ANOMALIES FOUND") {
		t.Fatalf("both: exit %d, want 1 and the finding\n%s%s", code, out, errOut)
	}
	if code, _, errOut := auditScanOutput("--dir", a, "--dir", a); code != auditScanFailed || !strings.Contains(errOut, "twice") {
		t.Errorf("one store twice: exit %d, %s; want 2 naming it", code, errOut)
	}
	if code, _, errOut := auditScanOutput("--dir", a, "--clock-skew", "5s"); code != auditScanFailed || !strings.Contains(errOut, "several stores") {
		t.Errorf("--clock-skew with one store: exit %d, %s; want a usage error", code, errOut)
	}
	if code, _, _ := auditScanOutput("--dir", a, "--dir", b, "--clock-skew", "1h"); code != auditScanAnomalies {
		t.Errorf("a clock skew of an hour takes the two first mints as concurrent, which fits no order either: exit %d, want 1", code)
	}
}
