package embedded

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// Bucket names. They are part of the file format.
const (
	bucketBindings   = "bindings"
	bucketIdentities = "identities"
)

// recordVersion is the "v" of every value this version writes. A value with
// another version is refused as corrupt rather than guessed at, so a newer
// format is never misread by an older daemon.
const recordVersion = 1

// Sizes of the random material, in bytes before encoding.
const (
	roleIDBytes = 16 // formatted as a version 4 UUID, like OpenBao's role ids
	secretBytes = 32 // base64url without padding: 43 characters
)

// bindingRecord is a bindings value: what the registration id is bound to.
// The spec has its own JSON names so that the file format does not follow
// registrar.Spec's tags if they ever change.
//
// Owner was added without a new version: a binding written before owners
// were recorded has no "owner" and decodes with Owner "", which is what the
// ownership check is given for it; a binding minted with no owner is
// written without one, in the same shape.
type bindingRecord struct {
	V         int        `json:"v"`
	Host      string     `json:"host"`
	Spec      specRecord `json:"spec"`
	RoleID    string     `json:"role_id"`
	CreatedAt time.Time  `json:"created_at"`
	// Owner is the caller identity of the mint that created the binding.
	Owner string `json:"owner,omitempty"`
}

type specRecord struct {
	Component   string `json:"component"`
	ServiceName string `json:"service_name"`
	Reload      string `json:"reload"`
}

// identityRecord is an identities value: the current wrapped secret, by its
// hash only.
type identityRecord struct {
	V            int       `json:"v"`
	RoleID       string    `json:"role_id"`
	SecretSHA256 string    `json:"secret_sha256"` // lowercase hex
	ExpiresAt    time.Time `json:"expires_at"`
	IssuedAt     time.Time `json:"issued_at"`
}

func toSpecRecord(s registrar.Spec) specRecord {
	return specRecord{Component: s.Component, ServiceName: s.ServiceName, Reload: s.Reload}
}

func (s specRecord) spec() registrar.Spec {
	return registrar.Spec{Component: s.Component, ServiceName: s.ServiceName, Reload: s.Reload}
}

func decodeBinding(key string, raw []byte) (bindingRecord, error) {
	var r bindingRecord
	if err := decode(raw, &r, &r.V); err != nil {
		return r, &CorruptRecordError{Bucket: bucketBindings, Key: key, Err: err}
	}
	if r.Host == "" || r.RoleID == "" {
		return r, &CorruptRecordError{Bucket: bucketBindings, Key: key, Err: errors.New("host or role_id is empty")}
	}
	return r, nil
}

func decodeIdentity(key string, raw []byte) (identityRecord, error) {
	var r identityRecord
	if raw == nil {
		return r, &CorruptRecordError{Bucket: bucketIdentities, Key: key, Err: errors.New("missing although its binding exists")}
	}
	if err := decode(raw, &r, &r.V); err != nil {
		return r, &CorruptRecordError{Bucket: bucketIdentities, Key: key, Err: err}
	}
	if h, err := hex.DecodeString(r.SecretSHA256); err != nil || len(h) != sha256.Size {
		return r, &CorruptRecordError{Bucket: bucketIdentities, Key: key, Err: errors.New("secret_sha256 is not a hex SHA-256")}
	}
	return r, nil
}

// decode unmarshals raw into dst and checks the version it read into v.
// The error never quotes raw: a value may hold what it should not.
func decode(raw []byte, dst any, v *int) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("undecodable value (%d bytes): %w", len(raw), err)
	}
	if *v != recordVersion {
		return fmt.Errorf("record version %d, want %d", *v, recordVersion)
	}
	return nil
}

// newRoleID reads a random version 4 UUID from r.
func newRoleID(r io.Reader) (string, error) {
	var b [roleIDBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("reading random role id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:]), nil
}

// newSecret reads a random wrapped secret id from r and returns it with the
// hex SHA-256 that is all the database ever holds of it.
func newSecret(r io.Reader) (secret, sum string, err error) {
	var b [secretBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", "", fmt.Errorf("reading random wrapped secret id: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	return secret, hashSecret(secret), nil
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// stamp is the stored form of an instant: UTC, millisecond precision (the
// precision of the audit records).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
