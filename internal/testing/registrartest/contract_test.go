package registrartest_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
)

var errInjected = errors.New("injected failure")

func TestBackendContract(t *testing.T) {
	// Without a T: the suite's concurrency subtests call one id from
	// many goroutines on purpose, which the overlap check would report.
	backendtest.Run(t, func(*testing.T) registrar.Backend { return registrartest.NewBackend(nil) }, backendtest.Options{
		// Step 0 of either verb is Err, which fails a call before it
		// changes anything; step 1 is Partial, which fails it after.
		Fault: func(_ *testing.T, b registrar.Backend, _ backendtest.Call, step int) (func(), bool) {
			fake := b.(*registrartest.Backend)
			switch step {
			case 0:
				fake.Err = errInjected
			case 1:
				fake.Partial = errInjected
			default:
				return nil, false
			}
			return func() { fake.Err, fake.Partial = nil, nil }, true
		},
		Deliver: func(_ *testing.T, b registrar.Backend, id string, m registrar.Material) func() error {
			return func() error {
				if !b.(*registrartest.Backend).Valid(id, m.WrappedSecretID) {
					return errors.New("the wrapped secret id is no longer the current one")
				}
				return nil
			}
		},
		DropOwner: func(_ *testing.T, b registrar.Backend, id string) { b.(*registrartest.Backend).DropOwner(id) },
	})
}

// recorder is an Errorfer that keeps what it is told.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func TestOverlappingCallsForOneIDAreReported(t *testing.T) {
	rec := &recorder{}
	b := registrartest.NewBackend(rec)
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.Before = func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(inside)
			<-release // hold the first call inside the backend
		}
	}
	op := registrar.MintOp{RegistrationID: "h1-review-001", Host: "h1"}
	var wg sync.WaitGroup
	wg.Go(func() { b.Mint(t.Context(), op) })
	<-inside
	b.Deregister(t.Context(), registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h1"})
	// Another id overlapping the held call is not reported.
	b.Mint(t.Context(), registrar.MintOp{RegistrationID: "h1-review-002", Host: "h1"})
	close(release)
	wg.Wait()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := "two backend calls for h1-review-001 overlap"; len(rec.msgs) != 1 || rec.msgs[0] != want {
		t.Errorf("reported: got %q, want exactly [%q]", rec.msgs, want)
	}
}

func TestCeilings(t *testing.T) {
	backendtest.RunCeilings(t, func(*testing.T) registrar.Backend { return registrartest.NewBackend(nil) }, backendtest.CeilingOptions{})
}
