package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The registrar.backend values.
const (
	// BackendEmbedded is the default backend: a bbolt file in
	// registrar.state_dir.
	BackendEmbedded = "embedded"
	// BackendOpenBao mints real AppRole identities on the OpenBao (or
	// Vault) server of the [openbao] table.
	BackendOpenBao = "openbao"
)

// The environment variables the OpenBao token may come from, in order of
// precedence, when openbao.token_file is not set.
const (
	EnvBaoToken   = "BAO_TOKEN"
	EnvVaultToken = "VAULT_TOKEN"
)

// The systemd credential ReadToken reads first: the unit's
// LoadCredential=openbao-token:/etc/registrar-otel/openbao-token makes
// systemd place a copy of the file, readable by the service only, at
// $CREDENTIALS_DIRECTORY/openbao-token.
const (
	EnvCredentialsDirectory = "CREDENTIALS_DIRECTORY"
	CredentialName          = "openbao-token"
	// credentialKey names the credential in errors, as a key names a file.
	credentialKey = "systemd credential " + CredentialName
)

// MaxTokenFileBytes bounds openbao.token_file: a token is about 100 bytes,
// and a file far larger is not a token file.
const MaxTokenFileBytes = 4096

// OpenBao is the [openbao] table, read by the openbao backend when
// registrar.backend = "openbao". It never holds the token itself: the token
// is read from TokenFile or the environment by ReadToken, so it is never in
// a configuration file, a Config value or a log line. Durations carry their
// unit in the field name.
type OpenBao struct {
	// Address is the server's URL, e.g. "https://openbao.internal:8200",
	// or the URLs of a cluster's nodes separated by commas (the file may
	// give them as a TOML array, which is stored so joined); Addresses
	// splits it. Required when registrar.backend = "openbao". http:// is
	// accepted only for a loopback host (the token would otherwise travel
	// in clear).
	Address string
	// CAFile is a PEM bundle of the CA certificates that sign the server's
	// certificate; "" means the system roots. Only with an https:// address.
	CAFile string
	// TokenFile holds the token, readable by its owner only (mode 0600 or
	// 0400). "" means the token comes from BAO_TOKEN, else VAULT_TOKEN.
	TokenFile string
	// KVMount is the path of the KV version 2 mount holding the bindings.
	// Default "secret".
	KVMount string
	// KVPrefix is the path inside KVMount under which the bindings live, as
	// <kv_prefix>/bindings/<registration_id>, and the services' own
	// secrets, as <kv_prefix>/services/<service_name>/. Default
	// "registrar-otel".
	KVPrefix string
	// AppRoleMount is the path of the AppRole auth mount. Default "approle".
	AppRoleMount string
	// RequestTimeoutMS bounds each request to the server in milliseconds.
	// Default 5000, greater than 0.
	RequestTimeoutMS uint32
	// ReadinessGraceMS is how long in milliseconds the backend's requests
	// may fail to reach an active node of the cluster before the readiness
	// probe (/readyz) answers 503. Default 10000 (longer than a raft
	// election), greater than 0.
	ReadinessGraceMS uint32
	// MaxInFlight bounds the mints and deregistrations talking to the
	// server at once (each makes its requests one after the other). A call
	// that finds every slot taken waits at most 100 ms, then answers
	// BackendUnavailable without a request. Default 16, well below the
	// listeners' connection caps, greater than 0.
	MaxInFlight uint32
	// SecretIDTTLSeconds is the lifetime in seconds of each secret id the
	// AppRole role issues, from its creation. Default 3600, greater than 0
	// and at least registrar.max_wrap_ttl_seconds (a secret id must outlive
	// the wrapping that delivers it).
	SecretIDTTLSeconds uint32
	// SecretIDNumUses is how many logins one secret id allows. Default 1,
	// greater than 0.
	SecretIDNumUses uint32
}

// secretKeys are [openbao] keys that would put a credential in the file.
// They are refused by name, and their value is never repeated.
var secretKeys = map[string]bool{"token": true, "secret_id": true, "role_id": true, "unseal_key": true}

const ruleInlineToken = "must not be set: the token is read only from openbao.token_file (a file readable by its owner only) or the " +
	EnvBaoToken + " / " + EnvVaultToken + " environment variable, never from the configuration"

// openbao decodes the [openbao] table. Unknown keys are warned about like
// every other table's, except a credential, which is an error.
func (d *decoder) openbao(v any, c *Config) {
	m, unknown := decodeTable(d, "openbao", v, openbaoKeys, c)
	for _, k := range unknown {
		key := keyPath("openbao", k)
		if secretKeys[strings.ToLower(k)] {
			ke := &KeyError{Key: key, Rule: ruleInlineToken}
			if ev, ok := m[k].(envValue); ok {
				ke.EnvVar = ev.Var
			}
			d.errs = append(d.errs, ke)
			d.bad[key] = true
			continue
		}
		d.unknown = append(d.unknown, unknownKey{key: key})
	}
}

// Addresses returns Address's URLs, in order: one for a single server,
// several for a cluster's nodes (nil when Address is "").
func (o *OpenBao) Addresses() []string { return splitAddresses(o.Address) }

func splitAddresses(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// addresses decodes openbao.address: a string (one URL, or several
// separated by commas, as the environment variable gives them) or a TOML
// array of URL strings, stored joined by ", ". An array element that is
// not a string, or holds a comma, is named by its position.
func (d *decoder) addresses(key string, v any) (string, bool) {
	list, ok := v.([]any)
	if !ok {
		return d.string(key, v)
	}
	if len(list) == 0 {
		d.failHidden(key, v, "must name at least one URL; an empty array names none")
		return "", false
	}
	parts := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok || strings.Contains(s, ",") || strings.TrimSpace(s) == "" {
			what := "must be a non-empty string"
			if ok && strings.Contains(s, ",") {
				what = "must be one URL, without a comma"
			}
			d.fail(key, redactElement(e), fmt.Sprintf("element %d (of %d) %s", i+1, len(list), what))
			return "", false
		}
		parts[i] = s
	}
	return strings.Join(parts, ", "), true
}

func redactElement(e any) any {
	if s, ok := e.(string); ok {
		return RedactURL(s)
	}
	return e
}

// redactAddresses shows openbao.address with each URL redacted.
func redactAddresses(v string) string {
	parts := splitAddresses(v)
	for i, p := range parts {
		parts[i] = RedactURL(p)
	}
	return strings.Join(parts, ", ")
}

// checkOpenBaoAddressKey: the [openbao] values are checked whatever the
// backend, so a typo is caught before the switch; what the openbao backend
// needs (an address, a secret id TTL covering the wrap TTL) only when it is
// selected. With several URLs each error names the URL's position, and a
// URL given twice is refused.
func checkOpenBaoAddressKey(c *Config, _, v string, add func(*KeyError)) {
	parts := splitAddresses(v)
	switch {
	case len(parts) == 0 && c.Registrar.Backend == BackendOpenBao:
		add(&KeyError{Key: "openbao.address", Rule: `is required when registrar.backend is "openbao"`})
	case len(parts) == 1:
		if e := checkOpenBaoAddress(parts[0]); e != nil {
			add(e)
		}
	case len(parts) > 1:
		seen := map[string]int{}
		for i, p := range parts {
			where := fmt.Sprintf("element %d (of %d) ", i+1, len(parts))
			if e := checkOpenBaoAddress(p); e != nil {
				e.Rule = where + e.Rule
				add(e)
				continue
			}
			norm := strings.ToLower(strings.TrimSuffix(p, "/"))
			if j, dup := seen[norm]; dup {
				add(&KeyError{Key: "openbao.address", Value: p, Rule: where + fmt.Sprintf("repeats element %d: each node once", j)})
				continue
			}
			seen[norm] = i + 1
		}
	}
}

// checkCAFile: a CA bundle is for https:// addresses only.
func checkCAFile(c *Config, key, v string, add func(*KeyError)) {
	if v != "" {
		for _, a := range c.OpenBao.Addresses() {
			if checkOpenBaoAddress(a) == nil && !strings.HasPrefix(a, "https://") {
				add(&KeyError{Key: key, Value: v, Rule: "is set but openbao.address is not an https:// URL"})
				break
			}
		}
	}
	noNUL(c, key, v, add)
}

func checkAPIPath(_ *Config, key, v string, add func(*KeyError)) {
	if !isAPIPath(v) {
		add(&KeyError{Key: key, Value: v,
			Rule: "must be a path of one or more segments of letters, digits, '-', '_' and '.', separated by single '/', without a leading or trailing '/' and without '.' or '..' segments"})
	}
}

// checkSecretIDTTL: a secret id must outlive the wrapping that delivers it.
func checkSecretIDTTL(c *Config, key string, v uint32, add func(*KeyError)) {
	nonZero("must be greater than 0; a zero TTL would issue secret ids that never expire")(c, key, v, add)
	if c.Registrar.Backend == BackendOpenBao && v != 0 && v < c.Registrar.MaxWrapTTLSeconds {
		add(&KeyError{Key: key, Value: v,
			Rule: fmt.Sprintf("must be at least registrar.max_wrap_ttl_seconds (%d): a secret id that expires before its wrapping is unwrapped cannot log in", c.Registrar.MaxWrapTTLSeconds)})
	}
}

// checkOpenBaoAddress accepts an http(s) URL with a host, without
// credentials, a query, a fragment or a path, and http:// only for a
// loopback host.
func checkOpenBaoAddress(v string) *KeyError {
	const key = "openbao.address"
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		// Redacted even when it does not parse: a mistyped URL may still
		// carry a password.
		return SecretKeyError(key, v, "must be an http:// or https:// URL with a host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return SecretKeyError(key, v, "must not carry credentials, a path, a query or a fragment")
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return &KeyError{Key: key, Value: v, Rule: "must be an https:// URL unless its host is a loopback address: over http:// the token would travel in clear"}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isAPIPath reports whether s is a relative API path: '/'-separated
// segments of [A-Za-z0-9._-], none empty, "." or "..".
func isAPIPath(s string) bool {
	if s == "" {
		return false
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return false
			}
		}
	}
	return true
}

// TokenSource says where ReadToken found the token, for messages. It never
// carries the token.
type TokenSource struct {
	// Credential is the path of the systemd credential when the token came
	// from it.
	Credential string
	// File is openbao.token_file when the token came from it.
	File string
	// EnvVar is BAO_TOKEN or VAULT_TOKEN when the token came from it.
	EnvVar string
}

// String returns e.g. `openbao.token_file "/etc/registrar-otel/bao-token"`
// or "environment variable BAO_TOKEN".
func (s TokenSource) String() string {
	if s.Credential != "" {
		return "systemd credential " + quote(s.Credential)
	}
	if s.File != "" {
		return "openbao.token_file " + quote(s.File)
	}
	return "environment variable " + s.EnvVar
}

// ReadToken returns the OpenBao token from the first of these sources that
// is present: the systemd credential $CREDENTIALS_DIRECTORY/openbao-token
// (LoadCredential=openbao-token:… in the unit, so the token is in neither
// the environment nor a file the service's user can name), TokenFile,
// BAO_TOKEN, VAULT_TOKEN, as found in environ (os.Environ() in
// production). A file source (the credential or TokenFile) is opened once
// without following a symlink or blocking, and must be a regular file owned
// by root or this user, readable by its owner only, holding one token. Errors are *KeyError naming openbao.token_file (or the
// variable) and never contain the token. The caller must not log the token.
func (o *OpenBao) ReadToken(environ []string) (string, TokenSource, error) {
	return o.readToken(environ, euid())
}

// readToken is ReadToken with the file's owner rule judged for uid.
func (o *OpenBao) readToken(environ []string, uid uint32) (string, TokenSource, error) {
	if dir, ok := lookupEnv(environ, EnvCredentialsDirectory); ok && dir != "" {
		path := filepath.Join(dir, CredentialName)
		if _, err := os.Lstat(path); err == nil {
			tok, err := readTokenFile(credentialKey, path, uid)
			if err != nil {
				return "", TokenSource{}, err
			}
			return tok, TokenSource{Credential: path}, nil
		}
	}
	if o.TokenFile != "" {
		tok, err := readTokenFile("openbao.token_file", o.TokenFile, uid)
		if err != nil {
			return "", TokenSource{}, err
		}
		return tok, TokenSource{File: o.TokenFile}, nil
	}
	for _, name := range []string{EnvBaoToken, EnvVaultToken} {
		v, ok := lookupEnv(environ, name)
		if !ok {
			continue
		}
		tok := strings.TrimSpace(v)
		if !isToken(tok) {
			return "", TokenSource{}, &KeyError{Key: name, Rule: "must hold one token: non-empty, printable, without spaces"}
		}
		return tok, TokenSource{EnvVar: name}, nil
	}
	return "", TokenSource{}, &KeyError{Key: "openbao.token_file",
		Rule: "is required when registrar.backend is \"openbao\" and neither " + EnvBaoToken + " nor " + EnvVaultToken + " is set"}
}

func lookupEnv(environ []string, name string) (string, bool) {
	// The last assignment wins, as with os.Getenv over a duplicated name.
	val, found := "", false
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val, found = v, true
		}
	}
	return val, found
}

func readTokenFile(key, path string, uid uint32) (string, error) {
	data, p := openChecked(path, MaxTokenFileBytes, true, uid)
	if p != nil {
		switch p.kind {
		case kindIO:
			return "", &KeyError{Key: key, Value: path, Rule: "cannot be opened: " + p.text}
		case kindTooLarge:
			return "", &KeyError{Key: key, Value: path, Rule: "must hold one token, but " + p.text}
		case kindReadable:
			return "", &KeyError{Key: key, Value: path, Rule: p.text}
		}
		return "", &KeyError{Key: key, Value: path, Rule: "must be a regular file owned by root or this user, readable by its owner only, but " + p.text}
	}
	tok := strings.TrimSpace(string(data))
	if !isToken(tok) {
		return "", &KeyError{Key: key, Value: path, Rule: "must hold one token: non-empty, printable, without spaces"}
	}
	return tok, nil
}

// isToken accepts a non-empty run of printable ASCII without spaces.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// pathErrText is an *fs.PathError's cause without its repetition of the
// path (the message names it already).
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// CheckFiles verifies, as `config check` does and the daemon does before
// a reload, the files the configuration names beyond itself: the
// subordinate uid file (LoadSubuids), and for the openbao backend the
// token (see ReadToken) and the CA bundle, which must hold at least one
// PEM certificate. It returns every problem joined, each a *KeyError, and
// the token's source (zero for the embedded backend).
func (c *Config) CheckFiles(environ []string) (TokenSource, error) {
	return c.CheckFilesFor(environ, euid())
}

// CheckFilesFor is CheckFiles with the token file's owner rule judged for
// the user uid (see LoadFor).
func (c *Config) CheckFilesFor(environ []string, uid uint32) (TokenSource, error) {
	var errs []error
	if _, err := c.LoadSubuids(); err != nil {
		errs = append(errs, err)
	}
	if c.Registrar.Backend != BackendOpenBao {
		return TokenSource{}, errors.Join(errs...)
	}
	_, src, err := c.OpenBao.readToken(environ, uid)
	if err != nil {
		errs = append(errs, err)
	}
	if c.OpenBao.CAFile != "" {
		if _, err := LoadCAFile(c.OpenBao.CAFile); err != nil {
			errs = append(errs, err)
		}
	}
	return src, errors.Join(errs...)
}

// LoadCAFile reads openbao.ca_file into a certificate pool; the error is a
// *KeyError naming the key.
func LoadCAFile(path string) (*x509.CertPool, error) {
	const key = "openbao.ca_file"
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &KeyError{Key: key, Value: path, Rule: "cannot be read: " + pathErrText(err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, &KeyError{Key: key, Value: path, Rule: "must be a PEM file holding at least one CA certificate"}
	}
	return pool, nil
}
