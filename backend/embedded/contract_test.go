package embedded_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// faultyRand is a random source that can be armed to fail after n more
// bytes (crypto/rand until then): the embedded backend's only fault seam inside a transaction.
type faultyRand struct {
	mu    sync.Mutex
	armed bool
	left  int
}

var errInjected = errors.New("injected: no entropy")

func (r *faultyRand) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.armed {
		return rand.Read(p)
	}
	if r.left <= 0 {
		return 0, errInjected
	}
	n := min(len(p), r.left)
	r.left -= n
	return n, nil
}

func TestBackendContract(t *testing.T) {
	rands := map[registrar.Backend]*faultyRand{}
	var mu sync.Mutex
	backendtest.Run(t, func(t *testing.T) registrar.Backend {
		r := &faultyRand{}
		b := openBackend(t, filepath.Join(t.TempDir(), "state"), embedded.Options{Rand: r})
		mu.Lock()
		rands[b] = r
		mu.Unlock()
		return b
	}, backendtest.Options{
		// A first mint reads a role id (16 bytes) and then a secret (32):
		// step 0 fails the first read, step 1 the second. A deregister
		// reads nothing random, so it has no step to fail.
		Fault: func(t *testing.T, b registrar.Backend, call backendtest.Call, step int) (func(), bool) {
			if call != backendtest.CallMint || step > 1 {
				return nil, false
			}
			mu.Lock()
			r := rands[b]
			mu.Unlock()
			r.mu.Lock()
			r.armed, r.left = true, 16*step
			r.mu.Unlock()
			return func() { r.mu.Lock(); r.armed = false; r.mu.Unlock() }, true
		},
		// The identity record is what the mint left (the binding's
		// validity, role id and owner) and the secret still verifies.
		Deliver: func(t *testing.T, b registrar.Backend, id string, m registrar.Material) func() error {
			eb := b.(*embedded.Backend)
			before, ok := binding(t, eb, id)
			if !ok {
				t.Fatalf("Binding(%s): absent right after its mint", id)
			}
			return func() error {
				after, ok, err := eb.Binding(id)
				switch {
				case err != nil:
					return err
				case !ok:
					return errors.New("the binding is gone")
				case after != before:
					return fmt.Errorf("the binding and identity changed from %+v to %+v", before, after)
				}
				valid, err := eb.VerifySecret(id, m.WrappedSecretID, m.ExpiresAt.Add(-time.Millisecond))
				if err == nil && !valid {
					err = errors.New("the wrapped secret id no longer verifies")
				}
				return err
			}
		},
		DropOwner: func(t *testing.T, b registrar.Backend, id string) { embedded.DropOwner(t, b.(*embedded.Backend), id) },
	})
}
