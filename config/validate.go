package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Limits of the checked values.
const (
	// MinAuditMaxFileBytes is the smallest accepted registrar.audit_max_file_bytes.
	MinAuditMaxFileBytes = 65536
	// MaxAuditStoreReserveBytes is the largest accepted
	// registrar.audit_store_reserve_bytes (1 EiB): a larger reserve would
	// hold the capacity state at "low" on any file system there is.
	MaxAuditStoreReserveBytes = 1 << 60
	// MaxAuditMinRetentionSeconds is the largest accepted
	// registrar.audit_min_retention_seconds (366 days): longer would
	// refuse mints for a year whenever the store is over its budget, which
	// is no longer a retention but a stop.
	MaxAuditMinRetentionSeconds = 366 * 24 * 60 * 60
	// MaxSocketPathBytes is the longest accepted registrar.socket_path: a
	// unix socket address (sun_path) holds 108 bytes including the NUL.
	MaxSocketPathBytes = 107
	// MaxConnsLimit is the largest accepted connection cap.
	MaxConnsLimit = 65536
	// MaxTimeoutMS is the largest accepted transport timeout (10 minutes).
	MaxTimeoutMS = 600000
	// MaxRefusalPaceMS is the longest accepted registrar.refusal_pace_ms:
	// the least retry_after (1 s), so a paced refusal is never answered
	// after the time it tells its caller to wait (server.MaxRefusalPace).
	MaxRefusalPaceMS = 1000
)

// maxU64 is the bound of a u64 key without a range of its own.
const maxU64 = math.MaxUint64

// Rules whose wording the spec fixes.
const (
	ruleZeroBurst    = "must be greater than 0; a zero burst throttles the first legitimate mint"
	ruleZeroInterval = "must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently"
	ruleZeroWindow   = "must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing"

	ruleZeroRetained    = "must be greater than 0; a zero retention deletes every rotated generation of the audit evidence"
	ruleZeroMaintenance = "must be greater than 0; a zero interval would spin the daemon tick"
	ruleZeroWrapTTL     = "must be greater than 0; a zero maximum refuses every mint with invalid_wrap_ttl"

	ruleZeroConns   = "must be greater than 0; a zero cap refuses every connection"
	ruleZeroTimeout = "must be greater than 0; a zero timeout closes every connection at once"
	// ruleZeroBodyTimeout: a request with a body is every verb call.
	ruleZeroBodyTimeout = "must be greater than 0; a zero timeout closes every connection that sends a request body, so no mint or deregister is ever answered"
	ruleZeroInFlight    = "must be greater than 0; a zero cap lets no request run"
	ruleZeroWait        = "must be greater than 0; a zero wait answers RegistrarBusy to every request that cannot start at once"

	ruleMultiplicity = `must be one of "one-per-deployment", "one-per-host", "many-per-host"`
)

// Validate checks c against every rule of the configuration contract, the
// same rules Load applies after decoding, and returns all violations joined
// (each a *KeyError), or nil. Registrar.Extra is not inspected. Use it for a
// Config built in code rather than loaded.
func (c *Config) Validate() error {
	var errs []error
	add := func(e *KeyError) { errs = append(errs, e) }
	for i := range allKeys {
		k := &allKeys[i]
		if k.check != nil {
			k.check(c, k.dotted(), add)
		}
	}
	return errors.Join(errs...)
}

// nonZero is the rule of a count or a duration whose zero would break
// something the rule says; the message does not repeat the zero.
func nonZero(why string) rule[uint32] {
	return func(_ *Config, key string, v uint32, add func(*KeyError)) {
		if v == 0 {
			add(&KeyError{Key: key, Value: v, Rule: why, hideValue: true})
		}
	}
}

// between is 1 to max, with the zero's own reason.
func between(max uint32, zero string) rule[uint32] {
	return func(_ *Config, key string, v uint32, add func(*KeyError)) {
		switch {
		case v == 0:
			add(&KeyError{Key: key, Value: v, Rule: zero, hideValue: true})
		case v > max:
			add(&KeyError{Key: key, Value: v, Rule: "must be at most " + strconv.FormatUint(uint64(max), 10)})
		}
	}
}

func atLeast(min uint64) rule[uint64] {
	return func(_ *Config, key string, v uint64, add func(*KeyError)) {
		if v < min {
			add(&KeyError{Key: key, Value: v, Rule: fmt.Sprintf("must be at least %d", min)})
		}
	}
}

// atMost32 is 0 to max.
func atMost32(max uint32) rule[uint32] {
	return func(_ *Config, key string, v uint32, add func(*KeyError)) {
		if v > max {
			add(&KeyError{Key: key, Value: v, Rule: fmt.Sprintf("must be at most %d", max)})
		}
	}
}

// atMost64 is 0 to max.
func atMost64(max uint64) rule[uint64] {
	return func(_ *Config, key string, v uint64, add func(*KeyError)) {
		if v > max {
			add(&KeyError{Key: key, Value: v, Rule: fmt.Sprintf("must be at most %d", max)})
		}
	}
}

// optional applies check to a value that is set; "" is always accepted.
func optional(check func(key, v string) *KeyError) rule[string] {
	return func(_ *Config, key, v string, add func(*KeyError)) {
		if v == "" {
			return
		}
		if e := check(key, v); e != nil {
			add(e)
		}
	}
}

// checkSocketPath is checkDir's rule and the length of a unix socket
// address.
func checkSocketPath(c *Config, key, v string, add func(*KeyError)) {
	if v == "" || strings.IndexByte(v, 0) >= 0 {
		checkDir(c, key, v, add)
		return
	}
	if len(v) > MaxSocketPathBytes {
		add(&KeyError{Key: key, Value: v, hideValue: true,
			Rule: fmt.Sprintf("must be at most %d bytes to fit a unix socket address, got %d bytes", MaxSocketPathBytes, len(v))})
	}
}

func checkGroup(_ *Config, key, v string, add func(*KeyError)) {
	if v != "" && !validGroupName(v) {
		add(&KeyError{Key: key, Value: v,
			Rule: "must be a group name (letters, digits, '_', '-', '.', not starting with '-') or a numeric gid"})
	}
}

// checkTLSFile is the rule of the three files of the TLS listener.
func checkTLSFile(c *Config, key, v string, add func(*KeyError)) {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		add(nulInPath(key, v))
	case v == "" && c.Registrar.TLSListen != "":
		add(&KeyError{Key: key, Rule: "is required when registrar.tls_listen is set"})
	}
}

// checkDir is the rule of a directory the daemon must have.
func checkDir(_ *Config, key, v string, add func(*KeyError)) {
	switch {
	case v == "":
		add(emptyPath(key))
	case strings.IndexByte(v, 0) >= 0:
		add(nulInPath(key, v))
	}
}

func noNUL(_ *Config, key, v string, add func(*KeyError)) {
	if strings.IndexByte(v, 0) >= 0 {
		add(nulInPath(key, v))
	}
}

func checkComponents(components map[string]vocab.Multiplicity, add func(*KeyError)) {
	for _, name := range slices.Sorted(maps.Keys(components)) {
		if e := checkComponentName(name); e != nil {
			add(e)
			continue
		}
		if m := components[name]; !m.Valid() {
			add(&KeyError{Key: keyPath("registrar", "components", name, "multiplicity"), Value: m.String(), Rule: ruleMultiplicity})
		}
	}
}

func checkBackend(_ *Config, key, v string, add func(*KeyError)) {
	switch v {
	case BackendEmbedded, BackendOpenBao:
	default:
		add(&KeyError{Key: key, Value: v, Rule: `must be "embedded" or "openbao"`})
	}
}

func checkServiceName(_ *Config, key, v string, add func(*KeyError)) {
	if strings.TrimSpace(v) == "" {
		add(&KeyError{Key: key, Value: v, Rule: "must be a non-empty string"})
	}
}

func checkTraceSample(_ *Config, key string, v uint32, add func(*KeyError)) {
	if v > MaxTraceSamplePerMillion {
		add(&KeyError{Key: key, Value: uint64(v), Rule: "must be at most 1000000 (every root trace)"})
	}
}

// checkSignalEndpoint is the rule of a per-signal OTLP endpoint: "",
// SignalOff or an endpoint.
func checkSignalEndpoint(_ *Config, key, v string, add func(*KeyError)) {
	if v == "" || v == SignalOff {
		return
	}
	if e := checkEndpoint(key, v); e != nil {
		e.Rule += ` (or "` + SignalOff + `" to switch the signal off, "" to follow telemetry.otlp_endpoint)`
		add(e)
	}
}

func emptyPath(key string) *KeyError {
	return &KeyError{Key: key, Value: "", Rule: "must be a non-empty path"}
}

func nulInPath(key, val string) *KeyError {
	return &KeyError{Key: key, Value: val, Rule: "must not contain a NUL byte"}
}

// checkHostPort accepts host:port with a decimal port 0..65535 and an
// optional (possibly empty, meaning every interface) host without spaces.
func checkHostPort(key, v string) *KeyError {
	const rule = "must be host:port with a numeric port (0 to 65535)"
	host, port, err := net.SplitHostPort(v)
	if err != nil || port == "" || strings.ContainsAny(host, " \t\r\n") {
		return &KeyError{Key: key, Value: v, Rule: rule}
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return &KeyError{Key: key, Value: v, Rule: rule}
		}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > math.MaxUint16 {
		return &KeyError{Key: key, Value: v, Rule: rule}
	}
	return nil
}

// checkEndpoint checks an OTLP endpoint. Its errors never repeat the
// user-info, query or fragment (RedactURL), not even of a value that does
// not parse: a password is not to be echoed to a terminal or a log.
func checkEndpoint(key, v string) *KeyError {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return SecretKeyError(key, v, "must be an http:// or https:// URL with a host")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.ForceQuery {
		// The OTLP exporters would silently drop these parts; say so
		// instead.
		return SecretKeyError(key, v, "must not carry credentials, a query or a fragment")
	}
	return nil
}

// validGroupName reports whether s can name a group in /etc/group: the
// portable characters of a name (useradd's rule, with '.'), at most 32
// bytes, or a number.
func validGroupName(s string) bool {
	if len(s) > 32 || s[0] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
