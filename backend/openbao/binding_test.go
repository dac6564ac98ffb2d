package openbao

import (
	"errors"
	"testing"
)

func TestDecodeBindingRefusesWhatItDoesNotKnow(t *testing.T) {
	good := map[string]any{"v": "1", "host": "h1", "component": "review", "service_name": "review", "reload": "", "state": "active", "created_at": "x"}
	bd, err := decodeBinding("p", 1, good)
	if err != nil {
		t.Fatalf("a good binding: %v", err)
	}
	// A binding written before owners were recorded has none.
	if bd.owner != "" {
		t.Errorf("a binding without an owner decoded with owner %q, want \"\"", bd.owner)
	}
	for name, mut := range map[string]func(m map[string]any){
		"future format": func(m map[string]any) { m["v"] = "2" },
		"number host":   func(m map[string]any) { m["host"] = 7 },
		"no state":      func(m map[string]any) { delete(m, "state") },
		"odd state":     func(m map[string]any) { m["state"] = "done" },
		"empty host":    func(m map[string]any) { m["host"] = "" },
		"number owner":  func(m map[string]any) { m["owner"] = 7 },
	} {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		mut(m)
		if _, err := decodeBinding("p", 1, m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decodeBinding = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestTheOwnerSurvivesTheBindingsRoundTrip(t *testing.T) {
	for _, owner := range []string{"unix-peer:uid=1000", ""} {
		in := &binding{host: "h1", state: stateActive, createdAt: "x", owner: owner}
		data := in.data()
		if _, ok := data["owner"]; ok != (owner != "") {
			t.Errorf("owner %q: data() has an owner key = %t, want %t (none is written for \"\")", owner, ok, owner != "")
		}
		out, err := decodeBinding("p", 1, data)
		if err != nil {
			t.Fatal(err)
		}
		if out.owner != owner {
			t.Errorf("owner %q came back as %q", owner, out.owner)
		}
	}
}
