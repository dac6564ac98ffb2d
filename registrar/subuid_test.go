package registrar_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
)

// TestTheSubordinateUIDRidesOnTheCallsRecords: a call whose transport
// mapped a subordinate uid to its owner writes that uid on its intent and
// its outcome, on both verbs, refused or not; a call without one writes
// none.
func TestTheSubordinateUIDRidesOnTheCallsRecords(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.NewBackend(t))
	m := goodMint()
	m.CallerSubuid = 100009
	if _, err := h.v.Mint(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	bad := goodMint()
	bad.CallerSubuid, bad.Host = 100003, "not a label"
	h.v.Mint(context.Background(), bad) // refused invalid_host
	d := goodDeregister()
	d.CallerSubuid = 100001
	if _, err := h.v.Deregister(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	plain := goodMint()
	if _, err := h.v.Mint(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	recs := h.log.Records()
	want := []uint32{100009, 100009, 100003, 100003, 100001, 100001, 0, 0}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		if r.CallerSubuid != want[i] || r.CallerIdentity != "unix-peer:uid=1000" {
			t.Errorf("record %d (%s %s): caller %q subuid %d, want unix-peer:uid=1000 and %d", i, r.Verb, r.Phase, r.CallerIdentity, r.CallerSubuid, want[i])
		}
	}
}
