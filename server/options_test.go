package server

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/wire"
)

func TestEachListenerKindGetsItsOwnCaps(t *testing.T) {
	o := Options{UnixMaxConns: 3, TLSMaxConns: 5, MaxConnsPerIdentity: 2, TLSHandshakeMaxConns: 7}
	for kind, want := range map[ListenerKind]budgetLimits{
		ListenerUnix: {maxConns: 3, perIdentity: 2, maxHS: 7},
		ListenerTLS:  {maxConns: 5, perIdentity: 2, maxHS: 7},
	} {
		if got := o.budget(kind); got != want {
			t.Errorf("%v listener: got %+v, want %+v", kind, got, want)
		}
	}
}

func TestBudgetsAndTimeoutsHaveTheirDefaults(t *testing.T) {
	h, err := health.NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Verbs: stubVerbs{}, Health: h})
	if err != nil {
		t.Fatal(err)
	}
	o := s.opts
	if o.UnixMaxConns != DefaultUnixMaxConns || o.TLSMaxConns != DefaultTLSMaxConns || o.TLSHandshakeMaxConns != DefaultTLSHandshakeMaxConns ||
		o.TLSHandshakeTimeout != DefaultTLSHandshakeTimeout || o.MaxConnsPerIdentity != DefaultMaxConnsPerIdentity ||
		o.RejectionLogInterval != DefaultRejectionLogInterval {
		t.Errorf("budgets got %+v, want the defaults", o)
	}
	if s.srv.ReadHeaderTimeout != wire.DefaultReadHeaderTimeout || s.srv.ReadTimeout != wire.DefaultReadTimeout ||
		s.srv.WriteTimeout != wire.DefaultWriteTimeout || s.srv.IdleTimeout != wire.DefaultIdleTimeout || s.srv.MaxHeaderBytes != wire.MaxHeaderBytes {
		t.Errorf("timeouts got %v/%v/%v/%v, header bound %d; want the defaults",
			s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout, s.srv.MaxHeaderBytes)
	}
}
