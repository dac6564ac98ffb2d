package openbao_test

import (
	"context"
	"path"
	"testing"

	"github.com/openbao/openbao/api/v2"

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
		if name != "binding_read" && name != "role_id_read" && name != "secret_id_list" {
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
		// The service unwraps its secret id now, as it would on delivery,
		// and the check is that it still logs in (which uses it up).
		Deliver: func(t *testing.T, _ registrar.Backend, id string, m registrar.Material) func() error {
			ctx := context.Background()
			s, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, m.WrappedSecretID)
			if err != nil {
				t.Fatalf("unwrapping the secret id of %s: %v", id, err)
			}
			secretID, _ := s.Data["secret_id"].(string)
			if secretID == "" {
				t.Fatalf("unwrapping the secret id of %s: no secret_id in %v", id, s.Data)
			}
			return func() error {
				_, err := login(ctx, e.unwrapper(t), m.RoleID, secretID)
				return err
			}
		},
		// A new version of the binding without "owner", written with the
		// root token, as a release before owners were recorded left it.
		DropOwner: func(t *testing.T, _ registrar.Backend, id string) {
			ctx := context.Background()
			kv, p := e.root.KVv2("secret"), path.Join(testPrefix, "bindings", id)
			s, err := kv.Get(ctx, p)
			if err != nil {
				t.Fatalf("reading the binding of %s: %v", id, err)
			}
			if o, _ := s.Data["owner"].(string); o == "" {
				t.Fatalf("the binding of %s records no owner: %v", id, s.Data)
			}
			delete(s.Data, "owner")
			if _, err := kv.Put(ctx, p, s.Data, api.WithCheckAndSet(s.VersionMetadata.Version)); err != nil {
				t.Fatalf("rewriting the binding of %s without its owner: %v", id, err)
			}
		},
	})
}
