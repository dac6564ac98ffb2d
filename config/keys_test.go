package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	gotoml "github.com/pelletier/go-toml/v2"
)

// TestEveryKeyAppearsInEveryPlace lists every place a configuration key
// must appear besides its row in keys.go, and fails naming the key and the
// place that lacks it: the struct field, the reload class, the full
// fixture, both languages' key tables (type, default and reload columns
// equal to the row) and config check's listing.
func TestEveryKeyAppearsInEveryPlace(t *testing.T) {
	def := Default()

	t.Run("struct field", func(t *testing.T) {
		var c Config
		fields := map[any]string{}
		for _, k := range allKeys {
			fields[k.field(&c)] = k.dotted()
		}
		for _, table := range []any{&c.Registrar, &c.Telemetry, &c.OpenBao} {
			v := reflect.ValueOf(table).Elem()
			for i := range v.NumField() {
				name := v.Type().Field(i).Name
				if name == "Extra" {
					continue // the unknown keys
				}
				if _, ok := fields[v.Field(i).Addr().Interface()]; !ok {
					t.Errorf("%s.%s has no row in keys.go", v.Type().Name(), name)
				}
			}
		}
	})

	t.Run("reload class", func(t *testing.T) {
		for _, k := range Keys() {
			if c := ReloadClass(k); c != Live && c != RestartOnly {
				t.Errorf("%s has no reload class", k)
			}
		}
	})

	t.Run("full fixture", func(t *testing.T) {
		path := filepath.Join("testdata", "valid_full.toml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]map[string]any
		if err := gotoml.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		full, err := Load(path, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range allKeys {
			if _, ok := raw[k.table][k.name]; !ok {
				t.Errorf("%s does not set %s", path, k.dotted())
			} else if k.show(&full) == k.show(&def) && k.name != "components" { // the fixture's are the examples
				t.Errorf("%s sets %s to its default; set another value, so a row filling the wrong field shows", path, k.dotted())
			}
		}
		// Some policy sets each key of a policy table, and some shadow
		// each key of a shadow table.
		policies, _ := raw["registrar"]["callers"].(map[string]any)
		set := map[string]bool{}
		for _, p := range policies {
			pt, _ := p.(map[string]any)
			for k := range pt {
				set[callersTable+".<name>."+k] = true
			}
			st, _ := pt[keyShadow].(map[string]any)
			for k := range st {
				set[callersTable+".<name>."+keyShadow+"."+k] = true
			}
		}
		for _, r := range callerRows() {
			if !set[r.Key] {
				t.Errorf("%s: no policy sets %s", path, r.Key)
			}
		}
	})

	for _, lang := range []string{"en", "ko"} {
		t.Run("docs "+lang, func(t *testing.T) {
			page := filepath.Join("..", "docs", lang, "configuration.md")
			data, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			rows := docRows(string(data))
			for _, r := range Table() {
				cells, ok := rows[r.Key]
				switch {
				case !ok:
					t.Errorf("%s has no row for `%s`", page, r.Key)
					continue
				case cells.typ != docType(lang, r.Type):
					t.Errorf("%s: `%s` has type %q, keys.go says %q", page, r.Key, cells.typ, docType(lang, r.Type))
				case cells.reload != r.Reload:
					t.Errorf("%s: `%s` is %q in the reload column, keys.go says %q", page, r.Key, cells.reload, r.Reload)
				case r.Key != componentsKey.dotted() && cells.def != r.Default:
					t.Errorf("%s: `%s` defaults to %q, keys.go says %q", page, r.Key, cells.def, r.Default)
				}
			}
		})
	}

	t.Run("config check", func(t *testing.T) {
		// The [openbao] keys are not in the JSON listing: config check
		// shows them in its text only with the openbao backend.
		golden := filepath.Join("..", "cmd", "registrar-otel", "testdata", "config_check_ok.json")
		data, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Config map[string]map[string]json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		for _, k := range allKeys {
			if k.table == "openbao" {
				continue
			}
			if _, ok := out.Config[k.table][k.name]; !ok {
				t.Errorf("%s: config check's listing has no %s", golden, k.dotted())
			}
		}
	})
}

// docCells are the checked columns of a key table row.
type docCells struct{ typ, def, reload string }

var (
	docRow   = regexp.MustCompile("(?m)^\\| `((?:registrar|telemetry|openbao)\\.[^`]+)` \\| (.*?) \\| (.*?) \\|.*\\| `(live|restart)` \\|$")
	codeSpan = regexp.MustCompile("`([^`]*)`")
)

// docRows reads a page's key tables: for each key its type, its default
// (the first code span of the cell, unquoted) and its reload class.
func docRows(page string) map[string]docCells {
	rows := map[string]docCells{}
	for _, m := range docRow.FindAllStringSubmatch(page, -1) {
		def := m[3]
		if s := codeSpan.FindStringSubmatch(def); s != nil {
			def = strings.Trim(s[1], `"`)
		}
		rows[m[1]] = docCells{typ: m[2], def: def, reload: m[4]}
	}
	return rows
}

// docType is a type as a language's page spells it.
func docType(lang, typ string) string {
	if lang != "ko" {
		return typ
	}
	if ko, ok := map[string]string{"path": "경로", "string": "문자열", "integer": "정수", "URL or `none`": "URL 또는 `none`", "array of strings": "문자열 배열", "URL or array of URLs": "URL 또는 URL 배열"}[typ]; ok {
		return ko
	}
	return typ
}

func TestKeysListsEveryKnownKey(t *testing.T) {
	keys := Keys()
	if len(keys) != 71 {
		t.Fatalf("Keys() has %d keys, want the 37 [registrar] keys, the 12 of a caller policy and the 4 of its shadow, and the 7 [telemetry] and 11 [openbao] keys: %v", len(keys), keys)
	}
	for _, want := range []string{"registrar.rate_limit_admission_burst", "registrar.callers.<name>.identities", "registrar.callers.<name>.scope_hosts", "registrar.callers.<name>.max_registrations", "registrar.components.<name>.max_instances_per_host", "registrar.callers.<name>.shadow.rate_limit_predecision_refusal_refill_interval_ms", "registrar.idle_timeout_ms", "registrar.max_conns_per_identity", "registrar.components.<name>.multiplicity", "telemetry.trace_sample_per_million", "registrar.backend", "registrar.log_level", "registrar.subuid_file", "registrar.read_body_timeout_ms", "registrar.max_in_flight_per_identity", "registrar.shared_in_flight", "registrar.wait_timeout_ms", "registrar.refusal_pace_ms", "openbao.secret_id_num_uses"} {
		if !slices.Contains(keys, want) {
			t.Errorf("Keys() lacks %s", want)
		}
	}
}

// TestErrorRankPutsKeysInDocumentationOrderThenTheRest: key errors sort
// as their keys are documented (a component's key with the components
// table), an error naming no known key after them, and an error that is
// not a *KeyError last.
func TestErrorRankPutsKeysInDocumentationOrderThenTheRest(t *testing.T) {
	order := []error{
		&KeyError{Key: "registrar.socket_path"},
		&KeyError{Key: "registrar.components.review.multiplicity"},
		&KeyError{Key: "telemetry.metrics_listen"},
		&KeyError{Key: "openbao.address"},
		&KeyError{Key: allKeys[len(allKeys)-1].table + "." + allKeys[len(allKeys)-1].name}, // the last key
		&KeyError{Key: "REGISTRAR_NOT_A_KEY"},
		errors.New("not a key error"),
	}
	for i := 1; i < len(order); i++ {
		if a, b := errorRank(order[i-1]), errorRank(order[i]); a >= b {
			t.Errorf("errorRank(%v) = %d, not below errorRank(%v) = %d", order[i-1], a, order[i], b)
		}
	}
	if got, want := errorRank(&KeyError{Key: "registrar.components.review.multiplicity"}), keyRank["registrar.components"]; got != want {
		t.Errorf("a component key ranks %d, want the components table's %d", got, want)
	}
}
