package config

import (
	"log/slog"
	"math"
	"strconv"
	"strings"
)

// key is one row of the key table (keys.go): everything this package knows
// about one configuration key. Loading (decode), the defaults (setDefault),
// the range checks of Validate (check), the environment variable (EnvVarOf
// of the dotted name), the error rank, Keys, the reload class and the value
// a reload diff and config check show (show) all derive from the row.
//
// koanf layers the defaults (rawDefaults), the file and the environment,
// but the merged map is decoded by the rows, not by koanf's Unmarshal:
// mapstructure's errors name a Go field path in its own words, not a
// *KeyError with the key, the value and the rule; it checks a range only as
// far as the Go type goes; it reads "8" as a number only under
// WeaklyTypedInput, which also turns true into 1; and the unknown keys of
// [registrar] must be kept in Extra and warned, not dropped or refused.
type key struct {
	table, name string
	// listed is the name Keys gives the key when it is not table.name
	// (the components table: registrar.components.<name>.multiplicity).
	listed string
	// typ is the type column of the documentation's key tables.
	typ  string
	live bool
	// doc is the key's one-line meaning; the documentation pages say the
	// rest in prose.
	doc        string
	setDefault func(*Config)
	decode     func(d *decoder, key string, v any, c *Config)
	show       func(*Config) string
	// check adds the key's rule violations (nil: no rule beyond its type).
	check func(c *Config, key string, add func(*KeyError))
	// field is the address of the struct field the key fills.
	field func(*Config) any
	// raw is the key's value in c as the TOML parser would have produced
	// it (nil: none), for koanf's defaults layer.
	raw func(c *Config) any
}

// dotted is the key's name as errors, logs and Keys spell it.
func (k *key) dotted() string {
	if k.listed != "" {
		return k.listed
	}
	return k.table + "." + k.name
}

// Row is a key table row as the documentation and config check read it.
type Row struct {
	// Key is the dotted name, e.g. "registrar.socket_path".
	Key string
	// Type is the documentation's type: "path", "string", "u32", "u64",
	// "host:port", "URL", …
	Type string
	// Default is the default value as Diff and config check show it ("" for
	// an unset string); the components' default is the example table.
	Default string
	// Reload is Live or RestartOnly.
	Reload string
	// Doc is the key's one-line meaning.
	Doc string
}

// Table returns the rows of every key, in documentation order (Keys's).
func Table() []Row {
	def := Default()
	out := make([]Row, 0, len(allKeys))
	for _, k := range allKeys {
		out = append(out, Row{Key: k.dotted(), Type: k.typ, Default: k.show(&def), Reload: reloadClass(k.live), Doc: k.doc})
	}
	return out
}

// Setting is one key's value as Diff and config check show it: secrets
// redacted, integers in decimal, the log level as the file spells it.
type Setting struct {
	Key, Value string
}

// Settings returns the value of every key in c, in documentation order.
func (c *Config) Settings() []Setting {
	out := make([]Setting, 0, len(allKeys))
	for _, k := range allKeys {
		out = append(out, Setting{Key: k.dotted(), Value: k.show(c)})
	}
	return out
}

// A rule checks one key's decoded value; c is there for the rules that
// relate two keys.
type rule[V any] func(c *Config, key string, v V, add func(*KeyError))

// typedKey builds the row of a key held in a field of type V.
func typedKey[V any](table, name, typ string, field func(*Config) *V, def V, live bool, doc string,
	decode func(d *decoder, key string, v any) (V, bool), show func(V) string, check rule[V]) key {
	k := key{
		table: table, name: name, typ: typ, live: live, doc: doc,
		setDefault: func(c *Config) { *field(c) = def },
		decode: func(d *decoder, key string, v any, c *Config) {
			if x, ok := decode(d, key, v); ok {
				*field(c) = x
			}
		},
		show:  func(c *Config) string { return show(*field(c)) },
		field: func(c *Config) any { return field(c) },
		raw:   func(c *Config) any { return rawValue(*field(c)) },
	}
	if check != nil {
		k.check = func(c *Config, key string, add func(*KeyError)) { check(c, key, *field(c), add) }
	}
	return k
}

func identity(s string) string { return s }

func (d *decoder) u32(key string, v any) (uint32, bool) {
	n, ok := d.uint(key, v, math.MaxUint32)
	return uint32(n), ok
}

func showU32(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
func showU64(v uint64) string { return strconv.FormatUint(v, 10) }

// stringKey is a key holding a string shown as it is.
func stringKey(table, name, typ string, field func(*Config) *string, def string, live bool, doc string, check rule[string]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).string, identity, check)
}

// urlKey is a string key that may carry credentials: shown redacted.
func urlKey(table, name, typ string, field func(*Config) *string, def string, live bool, doc string, check rule[string]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).string, RedactURL, check)
}

// u32Key is an unsigned 32-bit integer key.
func u32Key(table, name, typ string, field func(*Config) *uint32, def uint32, live bool, doc string, check rule[uint32]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).u32, showU32, check)
}

// u64Key is an unsigned 64-bit integer key of at most max.
func u64Key(table, name string, field func(*Config) *uint64, def, max uint64, live bool, doc string, check rule[uint64]) key {
	decode := func(d *decoder, key string, v any) (uint64, bool) { return d.uint(key, v, max) }
	return typedKey(table, name, "u64", field, def, live, doc, decode, showU64, check)
}

// Reload classes of the rows.
const (
	live    = true
	restart = false
)

// keyRank orders errors as the keys appear in the documentation (and in a
// well-kept file), whether a rule was checked while decoding or after: each
// table's name, then its keys. The removed telemetry.trace_sample_ratio
// ranks just after the key that replaced it.
var keyRank = func() map[string]int {
	rank := map[string]int{}
	for _, k := range allKeys {
		if _, ok := rank[k.table]; !ok {
			rank[k.table] = len(rank)
		}
		rank[k.table+"."+k.name] = len(rank)
		if k.table == "telemetry" && k.name == "trace_sample_per_million" {
			rank["telemetry."+removedTraceSampleRatio] = len(rank)
		}
	}
	return rank
}()

func errorRank(err error) int {
	ke, ok := err.(*KeyError)
	if !ok {
		return len(keyRank) + 1
	}
	if r, ok := keyRank[ke.Key]; ok {
		return r
	}
	if strings.HasPrefix(ke.Key, "registrar.components.") {
		return keyRank["registrar.components"]
	}
	return len(keyRank) // environment variables that name no key
}

// Keys returns every key this version knows, dotted and in documentation
// order, with the component table as registrar.components.<name>.multiplicity.
// The docs test checks each one is documented in every language.
func Keys() []string {
	keys := make([]string, 0, len(allKeys))
	for _, k := range allKeys {
		keys = append(keys, k.dotted())
	}
	return keys
}

// rawValue is a decoded value as the TOML parser spells it: integers are
// int64 (every default fits), a log level its name.
func rawValue(v any) any {
	switch x := v.(type) {
	case uint32:
		return int64(x)
	case uint64:
		return int64(min(x, math.MaxInt64))
	case slog.Level:
		return LogLevelName(x)
	}
	return v
}

// rawDefaults is the defaults layer of the load: every key's value in def,
// as the parser would have read it from a file.
func rawDefaults(def *Config) map[string]any {
	layer := map[string]any{}
	for _, k := range allKeys {
		v := k.raw(def)
		if v == nil {
			continue
		}
		t, ok := layer[k.table].(map[string]any)
		if !ok {
			t = map[string]any{}
			layer[k.table] = t
		}
		t[k.name] = v
	}
	return layer
}
