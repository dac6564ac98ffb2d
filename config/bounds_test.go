package config

import (
	"errors"
	"strings"
	"testing"
)

// keyErrorFor returns the Validate error naming key, or nil.
func keyErrorFor(t *testing.T, c Config, key string) *KeyError {
	t.Helper()
	err := c.Validate()
	if err == nil {
		return nil
	}
	var errs interface{ Unwrap() []error }
	list := []error{err}
	if errors.As(err, &errs) {
		list = errs.Unwrap()
	}
	for _, e := range list {
		var ke *KeyError
		if errors.As(e, &ke) && ke.Key == key {
			return ke
		}
	}
	return nil
}

// TestRegistrarBoundsAreInclusive holds the edges of the [registrar]
// checks: a value at its documented bound is accepted, one past it is
// refused under its key; a NUL at the very start of a path is found like
// one in its middle; and a socket group may use every letter, digit, '_',
// '-' and '.', the bytes just outside those ranges not.
func TestRegistrarBoundsAreInclusive(t *testing.T) {
	type tc struct {
		name   string
		key    string
		set    func(r *Registrar)
		refuse bool
	}
	cases := []tc{
		{"a socket path of 107 bytes", "registrar.socket_path", func(r *Registrar) { r.SocketPath = "/" + strings.Repeat("s", MaxSocketPathBytes-1) }, false},
		{"a socket path of 108 bytes", "registrar.socket_path", func(r *Registrar) { r.SocketPath = "/" + strings.Repeat("s", MaxSocketPathBytes) }, true},
		{"a NUL first in state_dir", "registrar.state_dir", func(r *Registrar) { r.StateDir = "\x00/var/lib/registrar" }, true},
		{"a NUL first in audit_record_dir", "registrar.audit_record_dir", func(r *Registrar) { r.AuditRecordDir = "\x00/var/log/registrar" }, true},
		{"max_conns_per_identity at its bound", "registrar.max_conns_per_identity", func(r *Registrar) { r.MaxConnsPerIdentity = MaxConnsLimit }, false},
		{"max_conns_per_identity past its bound", "registrar.max_conns_per_identity", func(r *Registrar) { r.MaxConnsPerIdentity = MaxConnsLimit + 1 }, true},
		{"idle_timeout_ms at its bound", "registrar.idle_timeout_ms", func(r *Registrar) { r.IdleTimeoutMS = MaxTimeoutMS }, false},
		{"idle_timeout_ms past its bound", "registrar.idle_timeout_ms", func(r *Registrar) { r.IdleTimeoutMS = MaxTimeoutMS + 1 }, true},
		{"a group of every edge character", "registrar.socket_group", func(r *Registrar) { r.SocketGroup = "az.AZ.09_-" }, false},
		{"a group in capitals", "registrar.socket_group", func(r *Registrar) { r.SocketGroup = "OPS" }, false},
	}
	for _, bad := range []string{"ops`", "ops{", "ops@", "ops[", "ops/", "ops:"} {
		cases = append(cases, tc{"the group " + bad, "registrar.socket_group", func(r *Registrar) { r.SocketGroup = bad }, true})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			c.set(&cfg.Registrar)
			ke := keyErrorFor(t, cfg, c.key)
			switch {
			case c.refuse && ke == nil:
				t.Errorf("Validate accepted it; want an error under %s (got %v)", c.key, cfg.Validate())
			case !c.refuse && ke != nil:
				t.Errorf("Validate refused it: %v", ke)
			}
		})
	}
}
