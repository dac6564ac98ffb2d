package embedded

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// legacyBindingRecord is a bindings value as the releases before owners
// were recorded wrote it: bindingRecord without Owner. It is kept here,
// spelled out, so that the test of that shape does not follow
// bindingRecord if it changes.
type legacyBindingRecord struct {
	V         int        `json:"v"`
	Host      string     `json:"host"`
	Spec      specRecord `json:"spec"`
	RoleID    string     `json:"role_id"`
	CreatedAt time.Time  `json:"created_at"`
}

// DropOwner rewrites id's binding in b in the shape a release before
// owners were recorded wrote, with bbolt directly: the contract suite's
// Options.DropOwner. The identity record is left as it is.
func DropOwner(t testing.TB, b *Backend, id string) {
	t.Helper()
	b.mu.RLock()
	defer b.mu.RUnlock()
	err := b.db.Update(func(tx *bolt.Tx) error {
		bindings, _, err := buckets(tx)
		if err != nil {
			return err
		}
		rec, err := decodeBinding(id, bindings.Get([]byte(id)))
		if err != nil {
			return err
		}
		raw, err := json.Marshal(legacyBindingRecord{V: rec.V, Host: rec.Host, Spec: rec.Spec, RoleID: rec.RoleID, CreatedAt: rec.CreatedAt})
		if err != nil {
			return err
		}
		return bindings.Put([]byte(id), raw)
	})
	if err != nil {
		t.Fatalf("rewriting the binding of %s without its owner: %v", id, err)
	}
}

// storedBinding returns id's binding value as stored.
func storedBinding(t *testing.T, b *Backend, id string) []byte {
	t.Helper()
	var raw []byte
	if err := b.view(func(bindings, _ *bolt.Bucket) error {
		raw = append(raw, bindings.Get([]byte(id))...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestTheOwnerIsStoredInTheBindingAndOnlyWhenThereIsOne(t *testing.T) {
	b := openTest(t)
	op := registrar.MintOp{RegistrationID: "web1-collector", Host: "web1", Spec: registrar.Spec{Component: "collector", ServiceName: "otel", Reload: "sighup"},
		WrapTTL: time.Minute, Now: time.Date(2026, 8, 23, 12, 0, 0, 0, time.UTC), Owner: "unix-peer:uid=1000"}
	if st, _, err := b.Mint(t.Context(), op); err != nil || st != registrar.MintCreated {
		t.Fatalf("Mint: got %s, %v; want MintCreated", st, err)
	}
	raw := storedBinding(t, b, op.RegistrationID)
	if !strings.Contains(string(raw), `"owner":"unix-peer:uid=1000"`) || !strings.Contains(string(raw), `"v":1,`) {
		t.Errorf("stored binding %s: want version 1 with the owner", raw)
	}

	// A mint that names no owner writes the shape of the releases before
	// owners: no "owner" at all, byte for byte what they wrote.
	op.RegistrationID, op.Owner = "web2-collector", ""
	if st, _, err := b.Mint(t.Context(), op); err != nil || st != registrar.MintCreated {
		t.Fatalf("Mint: got %s, %v; want MintCreated", st, err)
	}
	raw = storedBinding(t, b, op.RegistrationID)
	rec, err := decodeBinding(op.RegistrationID, raw)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := json.Marshal(legacyBindingRecord{V: rec.V, Host: rec.Host, Spec: rec.Spec, RoleID: rec.RoleID, CreatedAt: rec.CreatedAt})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(legacy) {
		t.Errorf("a binding minted without an owner is stored as\n%s\nwant the earlier releases' shape\n%s", raw, legacy)
	}
}

func TestABindingOfAnEarlierReleaseDecodesWithNoOwner(t *testing.T) {
	raw := []byte(`{"v":1,"host":"web1","spec":{"component":"collector","service_name":"otel","reload":"sighup"},"role_id":"1b4e28ba-2fa1-41d2-883f-0016d3cca427","created_at":"2026-08-23T12:34:56.789Z"}`)
	rec, err := decodeBinding("web1-collector", raw)
	if err != nil {
		t.Fatalf("decoding a binding of an earlier release: %v", err)
	}
	if rec.Owner != "" || rec.Host != "web1" || rec.RoleID != "1b4e28ba-2fa1-41d2-883f-0016d3cca427" {
		t.Errorf("decoded %+v, want host web1, its role id and no owner", rec)
	}
	if _, err := decodeBinding("web1-collector", []byte(`{"v":1,"host":"h","role_id":"r","owner":7}`)); err == nil {
		t.Errorf("an owner that is not a string decoded, want a *CorruptRecordError")
	}
}
