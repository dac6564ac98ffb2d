package server

import (
	"testing"
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
