package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Reload classes: whether a changed key can be put in force by a reload
// (SIGHUP or registrar-otel reload) or needs a restart.
const (
	// Live keys are applied by a reload.
	Live = "live"
	// RestartOnly keys need a restart; a reload that changes one applies
	// nothing.
	RestartOnly = "restart"
)

// Change is one key whose value differs between two configurations. Old
// and New are the values as a log line may show them: secrets redacted.
type Change struct {
	Key      string
	Old, New string
	// Live reports that a reload applies the change (ReloadClass Live).
	Live bool
}

// showComponents is the components table on one line, sorted by name.
func showComponents(m map[string]vocab.Multiplicity) string {
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+"="+m[name].String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// ReloadClass returns Live or RestartOnly for a key of Keys, and "" for a
// key this version does not know. A <name> of Keys stands for any name
// (registrar.callers.agents.rate_limit_admission_burst is live), and a
// caller policy's own name, as Diff reports it
// (registrar.callers.agents), is live.
func ReloadClass(key string) string {
	for _, r := range Table() {
		if matchesKey(r.Key, key) {
			return r.Reload
		}
	}
	if name, ok := strings.CutPrefix(key, callersTable+"."); ok && name != "" && !strings.Contains(name, ".") {
		return reloadClass(callersKey.live)
	}
	return ""
}

// matchesKey reports whether key is pattern with each <name> segment of
// pattern standing for one segment of key.
func matchesKey(pattern, key string) bool {
	ps, ks := strings.Split(pattern, "."), strings.Split(key, ".")
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != ks[i] && ps[i] != "<name>" {
			return false
		}
	}
	return true
}

func reloadClass(live bool) string {
	if live {
		return Live
	}
	return RestartOnly
}

// Diff returns every known key whose value differs from old to new, in
// documentation order, with secrets redacted; a caller policy added,
// changed or removed is one change named registrar.callers.<name>, its
// values the policy as the file sets it (a size it leaves unset follows
// the [registrar] key, whose own change Diff reports). Unknown keys kept in
// Registrar.Extra are not compared: this version does not use them.
func Diff(old, new Config) []Change {
	var out []Change
	for _, k := range allKeys {
		if k.diff != nil {
			out = append(out, k.diff(&old, &new)...)
			continue
		}
		o, n := k.show(&old), k.show(&new)
		if o != n {
			out = append(out, Change{Key: k.dotted(), Old: o, New: n, Live: k.live})
		}
	}
	return out
}

// RestartOnlyChanges returns the keys of changes that need a restart.
func RestartOnlyChanges(changes []Change) []string {
	var keys []string
	for _, c := range changes {
		if !c.Live {
			keys = append(keys, c.Key)
		}
	}
	return keys
}
