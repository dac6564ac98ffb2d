package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// decoder walks the merged raw map, checking each known key's type and
// range and filling the Config; it never coerces.
type decoder struct {
	errs    []error
	unknown []unknownKey
	bad     map[string]bool     // keys with a decoding error
	origin  map[string]envValue // keys whose value came from the environment
	// suggest is SuggestKey, given by load: the key table's rows decode
	// with it, and it reads the key table, so they cannot name it.
	suggest func(key string) string
}

type unknownKey struct {
	key    string
	kept   bool   // kept in Registrar.Extra
	envVar string // the variable that set it, "" for the file
}

// envVarOf is the variable a raw value came from, or "".
func envVarOf(v any) string {
	if ev, ok := v.(envValue); ok {
		return ev.Var
	}
	return ""
}

func (d *decoder) fail(key string, v any, rule string) {
	ke := &KeyError{Key: key, Value: v, Rule: rule}
	if ev, ok := v.(envValue); ok {
		ke.Value, ke.EnvVar = ev.Text, ev.Var
	}
	d.errs = append(d.errs, ke)
	d.bad[key] = true
}

// failHidden is fail for a rule that already says what the value is.
func (d *decoder) failHidden(key string, v any, rule string) {
	d.fail(key, v, rule)
	d.errs[len(d.errs)-1].(*KeyError).hideValue = true
}

func (d *decoder) root(raw map[string]any, cfg *Config) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch k {
		case "registrar":
			d.registrar(raw[k], cfg)
		case "telemetry":
			d.telemetry(raw[k], cfg)
		case "openbao":
			d.openbao(raw[k], cfg)
		default:
			d.unknown = append(d.unknown, unknownKey{key: keyPath(k), envVar: envVarOf(raw[k])})
		}
	}
}

// decodeTable decodes the known fields of one table in declaration order
// and returns the keys it does not know, sorted.
func decodeTable(d *decoder, table string, v any, keys []key, c *Config) (m map[string]any, unknown []string) {
	m, ok := d.table(table, v, "must be a table")
	if !ok {
		return nil, nil
	}
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k.name] = true
		if kv, ok := m[k.name]; ok {
			k.decode(d, table+"."+k.name, kv, c)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	return m, unknown
}

func (d *decoder) registrar(v any, c *Config) {
	r := &c.Registrar
	m, unknown := decodeTable(d, "registrar", v, registrarKeys, c)
	for _, k := range unknown {
		if r.Extra == nil {
			r.Extra = make(map[string]any, len(unknown))
		}
		ev := envVarOf(m[k])
		r.Extra[k] = plain(m[k])
		d.unknown = append(d.unknown, unknownKey{key: keyPath("registrar", k), kept: true, envVar: ev})
	}
}

func (d *decoder) telemetry(v any, c *Config) {
	m, unknown := decodeTable(d, "telemetry", v, telemetryKeys, c)
	for _, k := range unknown {
		if k == removedTraceSampleRatio {
			d.fail("telemetry."+k, m[k], ruleRemovedRatio(m[k]))
			continue
		}
		d.unknown = append(d.unknown, unknownKey{key: keyPath("telemetry", k), envVar: envVarOf(m[k])})
	}
}

// removedTraceSampleRatio is the float key telemetry.trace_sample_per_million
// replaced. It is refused, not ignored: a file that still sets it would
// otherwise run at the default rate without a word.
const removedTraceSampleRatio = "trace_sample_ratio"

// ruleRemovedRatio names the replacement and, for a ratio it can read,
// the integer that keeps the file's meaning.
func ruleRemovedRatio(v any) string {
	const rule = "is no longer a key: use telemetry.trace_sample_per_million, an integer from 0 to 1000000 (1 in 100 is 10000)"
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	case envValue:
		var err error
		if f, err = strconv.ParseFloat(x.Text, 64); err != nil {
			return rule
		}
	default:
		return rule
	}
	if !(f >= 0 && f <= 1) {
		return rule
	}
	return fmt.Sprintf("is no longer a key: use telemetry.trace_sample_per_million = %d (the same rate, as an integer from 0 to 1000000)",
		int64(math.Round(f*MaxTraceSamplePerMillion)))
}

// components decodes [registrar.components.<name>] tables into
// r.Components and r.MaxInstancesPerHost, over what is already there (the
// examples when no file was given, nothing otherwise).
func (d *decoder) components(key string, v any, r *Registrar) {
	m, ok := d.table(key, v, "must be a table")
	if !ok {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		ckey := keyPath("registrar", "components", name)
		if e := checkComponentName(name); e != nil {
			d.errs = append(d.errs, e)
			d.bad[ckey] = true
			continue
		}
		ct, ok := d.table(ckey, m[name], "must be a table with a multiplicity key")
		if !ok {
			continue
		}
		mkey := ckey + ".multiplicity"
		for _, k := range slices.Sorted(maps.Keys(ct)) {
			if k != "multiplicity" && k != keyMaxInstancesPerHost {
				d.unknown = append(d.unknown, unknownKey{key: keyPath("registrar", "components", name, k), envVar: envVarOf(ct[k])})
			}
		}
		// The ceiling is decoded (its type checked) whatever the
		// multiplicity, and kept only beside one that decoded.
		ceiling, hasCeiling := uint32(0), false
		if cv, ok := ct[keyMaxInstancesPerHost]; ok {
			ceiling, hasCeiling = d.u32(ckey+"."+keyMaxInstancesPerHost, cv)
		}
		mv, ok := ct["multiplicity"]
		if !ok {
			d.fail(mkey, nil, "is required")
			continue
		}
		text, isText := mv.(string)
		if ev, ok := mv.(envValue); ok {
			text, isText = ev.Text, true
			d.origin[mkey] = ev
		}
		mult, err := vocab.ParseMultiplicity(text)
		if !isText || err != nil {
			d.fail(mkey, mv, ruleMultiplicity)
			continue
		}
		r.Components[name] = mult
		if hasCeiling {
			if r.MaxInstancesPerHost == nil {
				r.MaxInstancesPerHost = map[string]uint32{}
			}
			r.MaxInstancesPerHost[name] = ceiling
		}
	}
}

func (d *decoder) table(key string, v any, rule string) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	d.fail(key, v, rule)
	return nil, false
}

func (d *decoder) string(key string, v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case envValue:
		d.origin[key] = x
		return x.Text, true
	}
	d.fail(key, v, "must be a string")
	return "", false
}

const ruleUnsigned = "must be an unsigned integer"

// uint accepts a TOML integer in 0..max, or an environment value of decimal
// digits only (no sign, space, base prefix or underscore) in 0..max.
func (d *decoder) uint(key string, v any, max uint64) (uint64, bool) {
	ruleMax := "must be at most " + strconv.FormatUint(max, 10)
	switch x := v.(type) {
	case int64:
		switch {
		case x < 0:
			d.fail(key, v, ruleUnsigned)
		case uint64(x) > max:
			d.fail(key, v, ruleMax)
		default:
			return uint64(x), true
		}
	case envValue:
		d.origin[key] = x
		if !isDigits(x.Text) {
			d.fail(key, v, ruleUnsigned)
			break
		}
		n, err := strconv.ParseUint(x.Text, 10, 64)
		if err != nil || n > max { // digits only, so the only possible error is the range
			d.fail(key, v, ruleMax)
			break
		}
		return n, true
	default:
		d.fail(key, v, ruleUnsigned)
	}
	return 0, false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// plain turns environment values back into the plain strings they are, so
// Registrar.Extra holds only what a TOML parser could have produced.
func plain(v any) any {
	switch x := v.(type) {
	case envValue:
		return x.Text
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
	}
	return v
}
