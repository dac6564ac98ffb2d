package openbao

import (
	"errors"
	"testing"
)

func TestDecodeBindingRefusesWhatItDoesNotKnow(t *testing.T) {
	good := map[string]any{"v": "1", "host": "h1", "component": "review", "service_name": "review", "reload": "", "state": "active", "created_at": "x"}
	if _, err := decodeBinding("p", 1, good); err != nil {
		t.Fatalf("a good binding: %v", err)
	}
	for name, mut := range map[string]func(m map[string]any){
		"future format": func(m map[string]any) { m["v"] = "2" },
		"number host":   func(m map[string]any) { m["host"] = 7 },
		"no state":      func(m map[string]any) { delete(m, "state") },
		"odd state":     func(m map[string]any) { m["state"] = "done" },
		"empty host":    func(m map[string]any) { m["host"] = "" },
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
