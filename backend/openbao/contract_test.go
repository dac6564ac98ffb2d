package openbao_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// fault is one failure the proxy injects: at the step-th request of a call,
// with act.
type fault struct {
	step int
	act  action
}

// faultsOf lists, for a call whose requests are seq, every request failed
// with a 503 (never applied) and every state-changing one applied and its
// answer lost. A dropped GET is not a fault: net/http replays a GET whose
// reused connection dropped, so the read succeeds.
func faultsOf(seq []string) []fault {
	var fs []fault
	for i := range seq {
		fs = append(fs, fault{i, fail503})
	}
	for i, name := range seq {
		if name != "binding_read" && name != "role_id_read" {
			fs = append(fs, fault{i, forwardDrop})
		}
	}
	return fs
}

func TestBackendContract(t *testing.T) {
	// One server for the whole suite: each subtest uses its own ids.
	runContract(t, newEnv(t, envOptions{}))
}

// runContract runs the contract suite, every answer kind and every fault
// of mintSequence and deregisterSequence, against e's server.
func runContract(t *testing.T, e *env) {
	faults := map[backendtest.Call][]fault{
		backendtest.CallMint:       faultsOf(mintSequence),
		backendtest.CallDeregister: faultsOf(deregisterSequence),
	}
	newBackend := func(t *testing.T) registrar.Backend { return e.restarted(t) }
	backendtest.Run(t, newBackend, backendtest.Options{
		Fault: func(_ *testing.T, _ registrar.Backend, call backendtest.Call, step int) (func(), bool) {
			fs := faults[call]
			if step >= len(fs) {
				return nil, false
			}
			e.px.failNth(fs[step].step, fs[step].act)
			return func() { e.px.setHook(nil) }, true
		},
		// The retry after a fault comes from a restarted daemon: a new
		// backend that knows only what the server holds.
		Restart: func(t *testing.T, _ registrar.Backend) registrar.Backend { return newBackend(t) },
	})
}
