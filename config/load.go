package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	kotoml "github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
)

// EnvPrefix starts every environment variable that overrides a key.
const EnvPrefix = "REGISTRAR_OTEL_"

// envDelim separates the levels of a key in an environment variable name.
const envDelim = "__"

// Load reads the configuration: the embedded defaults, overridden by the
// TOML file at path (when path is not ""), overridden by the REGISTRAR_OTEL_
// variables of environ (os.Environ() in production). It checks every key
// and returns all violations joined with errors.Join: *KeyError for a bad
// key, *SyntaxError for a file that is not TOML, *FileError for a file that
// cannot be read or is not a regular file (a FIFO, a device, a directory:
// refused at once, without blocking). The file is opened once, without
// following a symlink, and checked on that descriptor before it is read
// from it: a symlink, a file owned by neither root nor this user, and a
// group- or world-writable file are refused with an *UnsafeFileError
// (errors.Is ErrUnsafeFile). On error the returned Config is the zero value.
//
// Unknown keys never fail the load: each is logged once at warn level on
// logger (nil discards) with the attribute "key"; unknown [registrar] keys
// are also kept, untouched, in Registrar.Extra.
//
// Load is safe for concurrent use; it keeps no state between calls.
func Load(path string, environ []string, logger *slog.Logger) (Config, error) {
	if path == "" {
		return load(SourceDefaults, nil, environ, logger)
	}
	data, err := readConfigFile(path)
	if err != nil {
		return Config{}, err
	}
	return load(path, bytesProvider(data), environ, logger)
}

// loadBytes is Load with the file's content given directly, name standing
// for its path in messages. The fuzzer uses it.
func loadBytes(name string, data []byte, environ []string, logger *slog.Logger) (Config, error) {
	return load(name, bytesProvider(data), environ, logger)
}

// bytesProvider is a koanf.Provider over a TOML document held in memory.
type bytesProvider []byte

func (b bytesProvider) ReadBytes() ([]byte, error) { return b, nil }

func (b bytesProvider) Read() (map[string]any, error) {
	return nil, errors.New("config: bytesProvider supports ReadBytes only")
}

// envValue is a value that came from an environment variable: it is always
// text, parsed according to the key it lands on, and errors name the
// variable. Its fields are exported so koanf's deep copy keeps them.
type envValue struct {
	Var  string // the variable's name
	Text string // its value, verbatim
}

func load(source string, fileProvider koanf.Provider, environ []string, logger *slog.Logger) (Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := Default()
	cfg.Source = source
	if fileProvider != nil {
		// A file states the components; the examples are not merged in, so
		// an operator can remove them.
		cfg.Registrar.Components = map[string]Multiplicity{}
	}

	envVars, errs := scanEnv(environ)
	ko := koanf.New(".")
	if fileProvider != nil {
		if err := loadFile(ko, source, fileProvider); err != nil {
			// Nothing of the file can be checked; the environment's own
			// problems are still worth reporting in the same run.
			return Config{}, errors.Join(append([]error{err}, errs...)...)
		}
	}
	if len(envVars) > 0 {
		p := env.Provider(envDelim, env.Opt{
			Prefix: EnvPrefix,
			TransformFunc: func(name, value string) (string, any) {
				return strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), envValue{Var: name, Text: value}
			},
			EnvironFunc: func() []string { return envVars },
		})
		if err := ko.Load(p, nil); err != nil {
			return Config{}, fmt.Errorf("config: reading the environment: %w", err)
		}
	}

	d := &decoder{bad: map[string]bool{}, origin: map[string]envValue{}}
	d.root(ko.Raw(), &cfg)
	errs = append(errs, d.errs...)

	if err := cfg.Validate(); err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			ke := e.(*KeyError)
			if d.bad[ke.Key] {
				continue // already reported as a decoding error; the field holds its default
			}
			if ev, ok := d.origin[ke.Key]; ok {
				ke.EnvVar = ev.Var
				switch {
				case ke.Value != nil && ke.secret:
					ke.Value = RedactURL(ev.Text)
				case ke.Value != nil:
					ke.Value = ev.Text
				}
			}
			errs = append(errs, ke)
		}
	}

	for _, u := range d.unknown {
		attrs := []any{"key", u.key, "source", source}
		if u.envVar != "" {
			// A variable: name it, and suggest the "__" spelling when
			// that names a known key (one "_" between levels is the
			// usual slip).
			attrs = append(attrs, "variable", u.envVar)
			if s := SuggestEnvVar(u.envVar); s != "" {
				attrs = append(attrs, "did_you_mean", s)
			} else if s := SuggestKey(u.key); s != "" {
				attrs = append(attrs, "did_you_mean", EnvVarOf(s))
			}
		} else if s := SuggestKey(u.key); s != "" {
			attrs = append(attrs, "did_you_mean", s)
		}
		if u.kept {
			logger.Warn("unknown configuration key kept untouched; this version does not use it", attrs...)
		} else {
			logger.Warn("unknown configuration key ignored", attrs...)
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b error) int { return errorRank(a) - errorRank(b) })
		return Config{}, errors.Join(errs...)
	}
	r := &cfg.Registrar
	if r.TLSListen == "" {
		for _, f := range []struct{ key, val string }{
			{"registrar.tls_cert_file", r.TLSCertFile},
			{"registrar.tls_key_file", r.TLSKeyFile},
			{"registrar.tls_client_ca_file", r.TLSClientCAFile},
		} {
			if f.val != "" {
				logger.Warn("key ignored because registrar.tls_listen is not set", "key", f.key, "source", source)
			}
		}
	}
	if len(r.Components) == 0 {
		logger.Warn("no components configured: every mint will be refused with component_not_configured", "key", "registrar.components", "source", source)
	}
	return cfg, nil
}

// loadFile loads the TOML file into ko, turning the parser's and the file
// system's errors into a message that starts with the file (and position).
func loadFile(ko *koanf.Koanf, source string, p koanf.Provider) (err error) {
	data, err := p.ReadBytes()
	if err != nil {
		return &FileError{Path: source, Err: err}
	}
	defer func() {
		// The parser is third-party code fed operator input: a bug in it
		// must become a configuration error, not a crashed daemon.
		if r := recover(); r != nil {
			err = &SyntaxError{File: source, Msg: oneLine(fmt.Sprintf("the TOML parser failed: %v", r))}
		}
	}()
	err = ko.Load(bytesProvider(data), kotoml.Parser())
	if err == nil {
		return nil
	}
	se := &SyntaxError{File: source, Msg: oneLine(strings.TrimPrefix(err.Error(), "toml: ")), Err: err}
	if de := (*gotoml.DecodeError)(nil); errors.As(err, &de) {
		se.Line, se.Column = de.Position()
		se.Msg = oneLine(strings.TrimPrefix(de.Error(), "toml: "))
	} else {
		// The parser reports a redefined key or table without a position.
		se.Line = errorLine(data, err.Error())
	}
	return se
}

// errorLine finds the line of an error the TOML parser reports without a
// position, such as a key defined twice: the parser reads the document in
// order, so the shortest prefix of whole lines that fails with the same
// message ends on the offending line. It returns 0 if none does.
func errorLine(data []byte, msg string) int {
	var ends []int // the offset just past each line
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	n := sort.Search(len(ends), func(n int) bool {
		var m map[string]any
		err := gotoml.Unmarshal(data[:ends[n]], &m)
		return err != nil && err.Error() == msg
	})
	if n == len(ends) {
		return 0
	}
	return n + 1
}

// scanEnv selects the REGISTRAR_OTEL_ variables of environ that name a key
// and reports those that cannot: an empty level ("A____B", a trailing "__"),
// or one variable setting a key another one treats as a table (koanf would
// otherwise place the value somewhere unintended).
func scanEnv(environ []string) (accepted []string, errs []error) {
	type entry struct {
		kv, name string
		path     []string
	}
	var entries []entry
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		path := strings.Split(strings.ToLower(name[len(EnvPrefix):]), envDelim)
		if slices.Contains(path, "") {
			errs = append(errs, &KeyError{Key: envName(name),
				Rule: `does not name a configuration key: the key names after ` + EnvPrefix + ` are separated by "__" and none may be empty`})
			continue
		}
		entries = append(entries, entry{kv: kv, name: name, path: path})
	}
	leaves := make(map[string]string, len(entries)) // joined path -> variable
	for _, e := range entries {
		leaves[strings.Join(e.path, "\x00")] = e.name
	}
	dropped := map[string]bool{}
	for _, e := range entries {
		for i := 1; i < len(e.path); i++ {
			if other, ok := leaves[strings.Join(e.path[:i], "\x00")]; ok {
				errs = append(errs, &KeyError{Key: keyPath(e.path[:i]...),
					Rule: fmt.Sprintf("is set as a value by %s and as a table by %s", envName(other), envName(e.name))})
				dropped[other], dropped[e.name] = true, true
				break
			}
		}
	}
	for _, e := range entries {
		if !dropped[e.name] {
			accepted = append(accepted, e.kv)
		}
	}
	return accepted, errs
}

// decoder walks the merged raw map, checking each known key's type and
// range and filling the Config; it never coerces.
type decoder struct {
	errs    []error
	unknown []unknownKey
	bad     map[string]bool     // keys with a decoding error
	origin  map[string]envValue // keys whose value came from the environment
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

func (d *decoder) root(raw map[string]any, cfg *Config) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch k {
		case "registrar":
			d.registrar(raw[k], &cfg.Registrar)
		case "telemetry":
			d.telemetry(raw[k], &cfg.Telemetry)
		case "openbao":
			d.openbao(raw[k], &cfg.OpenBao)
		default:
			d.unknown = append(d.unknown, unknownKey{key: keyPath(k), envVar: envVarOf(raw[k])})
		}
	}
}

// field decodes one known key of table T.
//
// The tables below are kept by hand, not derived from struct tags with
// koanf's Unmarshal, because Unmarshal (mapstructure underneath) cannot
// give this package's answers: its errors name a Go field path in its own
// words, not a *KeyError with the key, the value and the rule; a range is
// checked only as far as the Go type goes (uint32 overflow, never
// MaxAuditStoreReserveBytes or a ratio in [0, 1]); a string such as "8"
// is accepted as a number only under WeaklyTypedInput, which also turns
// true into 1; and the unknown keys of [registrar] must be kept in Extra
// and warned, not dropped or refused. The order of each table is also the
// documentation's order (keyRank, Keys). TestFullFixtureSetsEveryKey
// keeps the tables and the structs in step: testdata/valid_full.toml sets
// every key to a value other than its default, and the test fails for any
// field of Registrar, Telemetry or OpenBao left at its default (a field
// without a row) or set to another value than the fixture's (a row that
// sets the wrong field); a row for a field that does not exist does not
// compile, and docs' TestEveryConfigKeyIsDocumented checks Keys against
// both languages.
type field[T any] struct {
	name string
	set  func(d *decoder, key string, v any, t *T)
}

var registrarFields = []field[Registrar]{
	{"socket_path", stringField(func(r *Registrar) *string { return &r.SocketPath })},
	{"socket_group", stringField(func(r *Registrar) *string { return &r.SocketGroup })},
	{"tls_listen", stringField(func(r *Registrar) *string { return &r.TLSListen })},
	{"tls_cert_file", stringField(func(r *Registrar) *string { return &r.TLSCertFile })},
	{"tls_key_file", stringField(func(r *Registrar) *string { return &r.TLSKeyFile })},
	{"tls_client_ca_file", stringField(func(r *Registrar) *string { return &r.TLSClientCAFile })},
	{"state_dir", stringField(func(r *Registrar) *string { return &r.StateDir })},
	{"audit_record_dir", stringField(func(r *Registrar) *string { return &r.AuditRecordDir })},
	{"audit_max_file_bytes", func(d *decoder, key string, v any, r *Registrar) {
		if n, ok := d.uint(key, v, math.MaxUint64); ok {
			r.AuditMaxFileBytes = n
		}
	}},
	{"audit_max_retained_files", u32Field(func(r *Registrar) *uint32 { return &r.AuditMaxRetainedFiles })},
	{"audit_store_reserve_bytes", func(d *decoder, key string, v any, r *Registrar) {
		if n, ok := d.uint(key, v, MaxAuditStoreReserveBytes); ok {
			r.AuditStoreReserveBytes = n
		}
	}},
	{"rate_limit_admission_burst", u32Field(func(r *Registrar) *uint32 { return &r.RateLimitAdmissionBurst })},
	{"rate_limit_admission_refill_interval_ms", u32Field(func(r *Registrar) *uint32 { return &r.RateLimitAdmissionRefillIntervalMS })},
	{"rate_limit_predecision_refusal_burst", u32Field(func(r *Registrar) *uint32 { return &r.RateLimitPredecisionRefusalBurst })},
	{"rate_limit_predecision_refusal_refill_interval_ms", u32Field(func(r *Registrar) *uint32 { return &r.RateLimitPredecisionRefusalRefillIntervalMS })},
	{"rate_limit_coalesce_window_seconds", u32Field(func(r *Registrar) *uint32 { return &r.RateLimitCoalesceWindowSeconds })},
	{"maintenance_interval_ms", u32Field(func(r *Registrar) *uint32 { return &r.MaintenanceIntervalMS })},
	{"max_wrap_ttl_seconds", u32Field(func(r *Registrar) *uint32 { return &r.MaxWrapTTLSeconds })},
	{"components", func(d *decoder, key string, v any, r *Registrar) { d.components(key, v, r) }},
	{"unix_max_conns", u32Field(func(r *Registrar) *uint32 { return &r.UnixMaxConns })},
	{"tls_max_conns", u32Field(func(r *Registrar) *uint32 { return &r.TLSMaxConns })},
	{"tls_handshake_max_conns", u32Field(func(r *Registrar) *uint32 { return &r.TLSHandshakeMaxConns })},
	{"tls_handshake_timeout_ms", u32Field(func(r *Registrar) *uint32 { return &r.TLSHandshakeTimeoutMS })},
	{"max_conns_per_identity", u32Field(func(r *Registrar) *uint32 { return &r.MaxConnsPerIdentity })},
	{"read_header_timeout_ms", u32Field(func(r *Registrar) *uint32 { return &r.ReadHeaderTimeoutMS })},
	{"idle_timeout_ms", u32Field(func(r *Registrar) *uint32 { return &r.IdleTimeoutMS })},
	{"backend", stringField(func(r *Registrar) *string { return &r.Backend })},
	{"log_level", func(d *decoder, key string, v any, r *Registrar) {
		s, ok := d.string(key, v)
		if !ok {
			return
		}
		l, err := ParseLogLevel(s)
		if err != nil {
			d.fail(key, v, ruleLogLevel)
			return
		}
		r.LogLevel = l
	}},
}

var telemetryFields = []field[Telemetry]{
	{"metrics_listen", stringField(func(t *Telemetry) *string { return &t.MetricsListen })},
	{"otlp_endpoint", stringField(func(t *Telemetry) *string { return &t.OTLPEndpoint })},
	{"service_name", stringField(func(t *Telemetry) *string { return &t.ServiceName })},
	{"trace_sample_per_million", u32Field(func(t *Telemetry) *uint32 { return &t.TraceSamplePerMillion })},
	{"otlp_traces_endpoint", stringField(func(t *Telemetry) *string { return &t.OTLPTracesEndpoint })},
	{"otlp_metrics_endpoint", stringField(func(t *Telemetry) *string { return &t.OTLPMetricsEndpoint })},
}

func stringField[T any](p func(*T) *string) func(*decoder, string, any, *T) {
	return func(d *decoder, key string, v any, t *T) {
		if s, ok := d.string(key, v); ok {
			*p(t) = s
		}
	}
}

func u32Field[T any](p func(*T) *uint32) func(*decoder, string, any, *T) {
	return func(d *decoder, key string, v any, t *T) {
		if n, ok := d.uint(key, v, math.MaxUint32); ok {
			*p(t) = uint32(n)
		}
	}
}

// decodeTable decodes the known fields of one table in declaration order
// and returns the keys it does not know, sorted.
func decodeTable[T any](d *decoder, table string, v any, fields []field[T], t *T) (m map[string]any, unknown []string) {
	m, ok := d.table(table, v, "must be a table")
	if !ok {
		return nil, nil
	}
	known := make(map[string]bool, len(fields))
	for _, f := range fields {
		known[f.name] = true
		if fv, ok := m[f.name]; ok {
			f.set(d, table+"."+f.name, fv, t)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	return m, unknown
}

func (d *decoder) registrar(v any, r *Registrar) {
	m, unknown := decodeTable(d, "registrar", v, registrarFields, r)
	for _, k := range unknown {
		if r.Extra == nil {
			r.Extra = make(map[string]any, len(unknown))
		}
		ev := envVarOf(m[k])
		r.Extra[k] = plain(m[k])
		d.unknown = append(d.unknown, unknownKey{key: keyPath("registrar", k), kept: true, envVar: ev})
	}
}

func (d *decoder) telemetry(v any, t *Telemetry) {
	m, unknown := decodeTable(d, "telemetry", v, telemetryFields, t)
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
// r.Components, over what is already there (the examples when no file was
// given, nothing otherwise).
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
			if k != "multiplicity" {
				d.unknown = append(d.unknown, unknownKey{key: keyPath("registrar", "components", name, k), envVar: envVarOf(ct[k])})
			}
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
		mult, err := ParseMultiplicity(text)
		if !isText || err != nil {
			d.fail(mkey, mv, ruleMultiplicity)
			continue
		}
		r.Components[name] = mult
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

// keyRank orders errors as the keys appear in the documentation (and in a
// well-kept file), whether a rule was checked while decoding or after.
var keyRank = func() map[string]int {
	rank := map[string]int{"registrar": 0}
	for _, f := range registrarFields {
		rank["registrar."+f.name] = len(rank)
	}
	rank["telemetry"] = len(rank)
	for _, f := range telemetryFields {
		rank["telemetry."+f.name] = len(rank)
		if f.name == "trace_sample_per_million" {
			rank["telemetry."+removedTraceSampleRatio] = len(rank)
		}
	}
	rank["openbao"] = len(rank)
	for _, f := range openbaoFields {
		rank["openbao."+f.name] = len(rank)
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
	var keys []string
	for _, f := range registrarFields {
		if f.name == "components" {
			keys = append(keys, "registrar.components.<name>.multiplicity")
			continue
		}
		keys = append(keys, "registrar."+f.name)
	}
	for _, f := range telemetryFields {
		keys = append(keys, "telemetry."+f.name)
	}
	for _, f := range openbaoFields {
		keys = append(keys, "openbao."+f.name)
	}
	return keys
}
