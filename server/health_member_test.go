package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// Every response fixture carries registrar_health with the limiter member
// byte for byte as before audit_capacity joined it, followed by the
// audit_capacity member with its five fields.
func TestEveryResponseFixtureCarriesAuditCapacityBesideAnUnchangedLimiter(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "response_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no response fixtures: %v", err)
	}
	const limiterBytes = `{"limited_predecision_refusal":3,"limited_admission":5}`
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Health map[string]json.RawMessage `json:"registrar_health"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := string(resp.Health["limiter"]); got != limiterBytes {
			t.Errorf("%s: limiter member %s, want the unchanged %s", f, got, limiterBytes)
		}
		var ac map[string]json.RawMessage
		if err := json.Unmarshal(resp.Health["audit_capacity"], &ac); err != nil {
			t.Errorf("%s: audit_capacity: %v", f, err)
			continue
		}
		for _, k := range []string{"state", "free_bytes", "store_bytes", "budget_bytes", "append_failures"} {
			if _, ok := ac[k]; !ok {
				t.Errorf("%s: audit_capacity lacks %s", f, k)
			}
		}
		if len(ac) != 5 {
			t.Errorf("%s: audit_capacity has %d members, want 5", f, len(ac))
		}
		if want := `"registrar_health":{"limiter":` + limiterBytes + `,"audit_capacity":`; !bytes.Contains(body, []byte(want)) {
			t.Errorf("%s: members not in the order limiter, audit_capacity", f)
		}
	}
}

// A client built for this version keeps a sibling member it does not know:
// re-encoding the decoded container gives back the server's bytes.
func TestClientKeepsAnUnknownSiblingMemberUnchanged(t *testing.T) {
	const healthJSON = `{"limiter":{"limited_predecision_refusal":1,"limited_admission":2},"audit_capacity":{"state":"critical","free_bytes":4096,"store_bytes":65536,"budget_bytes":1114112,"append_failures":3},"certificates":{"expiring_within_7d":4,"soonest":"2026-12-08T00:00:00.000Z"},"restart":{"unclean":false,"checkpoint":"none","evidence_gap_from":"","evidence_gap_to":"","recovered_records":0,"recovered_count":0}}`
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	server.SetHandler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"protocol_version":1,"registrar_health":` + healthJSON + "}\n"))
	}))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	resp, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Health.AuditCapacity != (health.AuditCapacityMember{State: "critical", FreeBytes: 4096, StoreBytes: 65536, BudgetBytes: 1114112, AppendFailures: 3}) {
		t.Errorf("audit_capacity decoded as %+v", resp.Health.AuditCapacity)
	}
	if got := resp.Health.Unknown(); len(got) != 1 || got[0] != "certificates" {
		t.Errorf("unknown members %q, want [certificates]", got)
	}
	out, err := json.Marshal(resp.Health)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != healthJSON {
		t.Errorf("re-encoded\n %s\nwant\n %s", out, healthJSON)
	}
}
