package openbao_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// walkSteps is the random walk's length on the server: a tenth of the
// embedded backend's, since every mint is four or five requests. Under the
// race detector on the development machine, 1,000 steps take about 9 s
// here; 10,000 took 87 s (once, seed 1, passing), against 10 to 16 s for
// the embedded backend's 10,000 on a real bbolt file.
const walkSteps = 1_000

// The ceilings over the Vault server: each subtest's backend has a KV
// prefix of its own (an empty registry), and a crash of the walk opens a
// new backend on the same server, sharing nothing in memory.
func TestCeilings(t *testing.T) {
	e := newEnv(t, envOptions{})
	var n atomic.Uint64
	open := func(t *testing.T, prefix string) registrar.Backend {
		b, err := openbao.New(openbao.Options{Address: e.px.URL, Token: e.token, KVPrefix: prefix, RequestTimeout: e.timeout,
			SecretIDTTL: time.Hour, SecretIDNumUses: 1, MaxInFlight: testMaxInFlight, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	prefixes := map[registrar.Backend]string{}
	backendtest.RunCeilings(t, func(t *testing.T) registrar.Backend {
		prefix := fmt.Sprintf("%s-ceilings-%d", testPrefix, n.Add(1))
		b := open(t, prefix)
		prefixes[b] = prefix
		return b
	}, backendtest.CeilingOptions{
		Steps: walkSteps,
		Restart: func(t *testing.T, b registrar.Backend) registrar.Backend {
			again := open(t, prefixes[b])
			prefixes[again] = prefixes[b]
			b.(*openbao.Backend).Close()
			return again
		},
	})
}
