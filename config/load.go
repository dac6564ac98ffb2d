package config

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	kotoml "github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/registrar-otel/registrar-otel/vocab"
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
	return LoadFor(path, environ, logger, euid())
}

// LoadFor is Load with the configuration file's owner rule judged for the
// user uid instead of this process's effective uid: the file must be owned
// by root or uid. It is for `registrar-otel config check` run as root on
// behalf of the user serve runs as, for whom a file of its own is
// acceptable.
func LoadFor(path string, environ []string, logger *slog.Logger, uid uint32) (Config, error) {
	if path == "" {
		return load(SourceDefaults, nil, environ, logger)
	}
	data, err := readConfigFile(path, uid)
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
		cfg.Registrar.Components = map[string]vocab.Multiplicity{}
	}

	envVars, errs := scanEnv(environ)
	// The layers, in koanf's order: the defaults, the file, the
	// environment. The decoder below then reads the merged result.
	ko := koanf.New(".")
	if err := ko.Load(confmap.Provider(rawDefaults(&cfg), ""), nil); err != nil {
		return Config{}, fmt.Errorf("config: loading the defaults: %w", err)
	}
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

	d := &decoder{bad: map[string]bool{}, origin: map[string]envValue{}, suggest: SuggestKey}
	d.root(ko.Raw(), &cfg)
	resolveCallers(&cfg.Registrar)
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
		slices.SortStableFunc(errs, compareErrors)
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
