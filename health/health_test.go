package health_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// noAuditCapacity is the audit_capacity member of a holder without its
// source.
const noAuditCapacity = `"audit_capacity":{"state":"","free_bytes":0,"store_bytes":0,"budget_bytes":0,"append_failures":0},` + noRestart

// noRestart is the restart member of a holder without its source.
const noRestart = `"restart":{"unclean":false,"checkpoint":"","evidence_gap_from":"","evidence_gap_to":"","recovered_records":0,"recovered_count":0}`

func TestHolderServesTheLastRefreshOnly(t *testing.T) {
	c := counting.New()
	h, err := health.NewHolder(health.LimiterSource(c))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(h.Current().JSON), `{"limiter":{"limited_predecision_refusal":0,"limited_admission":0},`+noAuditCapacity+`}`; got != want {
		t.Fatalf("initial snapshot %s, want %s", got, want)
	}
	for range 3 {
		c.Limited(context.Background(), limiter.Event{Bucket: vocab.PredecisionRefusal})
	}
	c.Limited(context.Background(), limiter.Event{Bucket: vocab.Admission})
	// No refresh: the served container is unchanged.
	if got := h.Current().Container.Limiter; got != (health.LimiterMember{}) {
		t.Fatalf("snapshot moved without a refresh: %+v", got)
	}
	if err := h.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(h.Current().JSON), `{"limiter":{"limited_predecision_refusal":3,"limited_admission":1},`+noAuditCapacity+`}`; got != want {
		t.Fatalf("after refresh %s, want %s", got, want)
	}
}

func TestEachBucketMovesOnlyItsField(t *testing.T) {
	for _, b := range []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission} {
		c := counting.New()
		h, _ := health.NewHolder(health.LimiterSource(c))
		for range 5 {
			c.Limited(context.Background(), limiter.Event{Bucket: b})
		}
		h.Refresh()
		got := h.Current().Container.Limiter
		want := health.LimiterMember{LimitedPredecisionRefusal: 5}
		if b == vocab.Admission {
			want = health.LimiterMember{LimitedAdmission: 5}
		}
		if got != want {
			t.Fatalf("flooding %v: %+v, want %+v", b, got, want)
		}
	}
}

func TestMemberRoundTripsBesideAnUnknownSibling(t *testing.T) {
	// A reader built for this version keeps the limiter member intact when
	// a later version adds a sibling member.
	in := `{"audit_capacity":{"free_bytes":123},"limiter":{"limited_predecision_refusal":7,"limited_admission":2}}`
	var c health.Container
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Limiter != (health.LimiterMember{LimitedPredecisionRefusal: 7, LimitedAdmission: 2}) {
		t.Fatalf("limiter member %+v after a round trip beside a sibling", c.Limiter)
	}
}

func TestAuditCapacityIsReadFromTheProbesLastResultOnRefreshOnly(t *testing.T) {
	store, err := audit.Open(audit.Options{Dir: filepath.Join(t.TempDir(), "audit"), MaxRetainedFiles: 3, MaxFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	probe, err := audit.NewCapacityProbe(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := health.NewHolder(health.LimiterSource(counting.New()), health.AuditCapacitySource(probe))
	if err != nil {
		t.Fatal(err)
	}
	first := h.Current().Container.AuditCapacity
	if first.State == "" || first.BudgetBytes != 4<<20 || first.StoreBytes != 0 || first.FreeBytes == 0 {
		t.Fatalf("initial member %+v, want a state, budget 4 MiB, an empty store and some free space", first)
	}
	if err := store.Append(context.Background(), &audit.Record{Phase: audit.PhaseIntent, RequestID: "r1", Verb: vocab.Mint,
		CallerIdentity: "uid=1", Requested: &audit.Requested{ServiceName: "s", Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	// The store grew and the probe ran (the tick's first step), but no
	// refresh: the served member is unchanged.
	if _, err := probe.Probe(); err != nil {
		t.Fatal(err)
	}
	if got := h.Current().Container.AuditCapacity; got != first {
		t.Fatalf("served member moved without a refresh: %+v, was %+v", got, first)
	}
	if err := h.Refresh(); err != nil {
		t.Fatal(err)
	}
	got := h.Current().Container.AuditCapacity
	if got.StoreBytes == 0 || got.StoreBytes != probe.Last().StoreBytes {
		t.Fatalf("after the refresh store_bytes = %d, want the probe's %d (> 0)", got.StoreBytes, probe.Last().StoreBytes)
	}
	// The limiter member is the same bytes it always was, first.
	js := string(h.Current().JSON)
	if !strings.HasPrefix(js, `{"limiter":{"limited_predecision_refusal":0,"limited_admission":0},"audit_capacity":{"state":"`) {
		t.Fatalf("encoding %s", js)
	}
}

func TestADecodedContainerReencodesUnknownMembersUnchanged(t *testing.T) {
	for _, in := range []string{
		// a sibling after the known members, one between them, one first
		`{"limiter":{"limited_predecision_refusal":7,"limited_admission":2},"audit_capacity":{"state":"low","free_bytes":10,"store_bytes":20,"budget_bytes":30,"append_failures":1},"restart":{"unclean":true,"checkpoint":"stale","evidence_gap_from":"2026-01-01T00:00:00.000Z","evidence_gap_to":"2026-01-01T00:00:02.000Z","recovered_records":3,"recovered_count":40},"certificates":{"expiring":[1,2,{"a":null}],"next":"2026-01-01"}}`,
		`{"limiter":{"limited_predecision_refusal":7,"limited_admission":2},"certificates":{"expiring":3},"audit_capacity":{"state":"low","free_bytes":10,"store_bytes":20,"budget_bytes":30,"append_failures":1},"restart":{"unclean":true,"checkpoint":"stale","evidence_gap_from":"2026-01-01T00:00:00.000Z","evidence_gap_to":"2026-01-01T00:00:02.000Z","recovered_records":3,"recovered_count":40}}`,
		`{"zeta":true,"limiter":{"limited_predecision_refusal":7,"limited_admission":2},"audit_capacity":{"state":"low","free_bytes":10,"store_bytes":20,"budget_bytes":30,"append_failures":1},"omega":"x","restart":{"unclean":true,"checkpoint":"stale","evidence_gap_from":"2026-01-01T00:00:00.000Z","evidence_gap_to":"2026-01-01T00:00:02.000Z","recovered_records":3,"recovered_count":40}}`,
	} {
		var c health.Container
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if c.Limiter != (health.LimiterMember{LimitedPredecisionRefusal: 7, LimitedAdmission: 2}) || c.AuditCapacity.State != "low" || c.AuditCapacity.BudgetBytes != 30 || c.Restart.RecoveredCount != 40 || !c.Restart.Unclean {
			t.Fatalf("known members %+v %+v", c.Limiter, c.AuditCapacity)
		}
		if len(c.Unknown()) == 0 {
			t.Fatalf("no unknown member kept from %s", in)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != in {
			t.Errorf("re-encoded\n %s\nwant\n %s", out, in)
		}
	}
}

func TestAContainerFromAnOlderServerGainsTheKnownMemberOnReencoding(t *testing.T) {
	var c health.Container
	if err := json.Unmarshal([]byte(`{"limiter":{"limited_predecision_refusal":1,"limited_admission":0},"x":1}`), &c); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(c)
	if want := `{"limiter":{"limited_predecision_refusal":1,"limited_admission":0},"x":1,` + noAuditCapacity + `}`; string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}

func TestDecodingRejectsANonObject(t *testing.T) {
	for _, in := range []string{`[]`, `"x"`, `{"limiter":"no"}`, `{"audit_capacity":{"free_bytes":-1}}`} {
		var c health.Container
		if err := json.Unmarshal([]byte(in), &c); err == nil {
			t.Errorf("decoding %s: no error", in)
		}
	}
}

func TestARepeatedKnownMemberIsEncodedOnceWithTheLastValue(t *testing.T) {
	var c health.Container
	in := `{"limiter":{"limited_predecision_refusal":1,"limited_admission":0},"x":[],"limiter":{"limited_predecision_refusal":9,"limited_admission":0}}`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(c)
	want := `{"limiter":{"limited_predecision_refusal":9,"limited_admission":0},"x":[],` + noAuditCapacity + `}`
	if string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}

func TestTheRestartMemberIsFixedAtStartAndEncodedAfterAuditCapacity(t *testing.T) {
	m := health.RestartMember{Unclean: true, Checkpoint: "ok", EvidenceGapFrom: "2026-01-01T00:00:00.000Z", EvidenceGapTo: "2026-01-01T00:00:01.500Z", RecoveredRecords: 2, RecoveredCount: 17}
	h, err := health.NewHolder(health.RestartSource(m))
	if err != nil {
		t.Fatal(err)
	}
	want := `"restart":{"unclean":true,"checkpoint":"ok","evidence_gap_from":"2026-01-01T00:00:00.000Z","evidence_gap_to":"2026-01-01T00:00:01.500Z","recovered_records":2,"recovered_count":17}}`
	if got := string(h.Current().JSON); !strings.HasSuffix(got, want) {
		t.Fatalf("got %s, want it to end with %s", got, want)
	}
	if err := h.Refresh(); err != nil || h.Current().Container.Restart != m {
		t.Fatalf("after a refresh: %+v, %v; want %+v", h.Current().Container.Restart, err, m)
	}
}
