package embedded_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// The ceilings over a real bbolt file in the test's temporary directory:
// a crash of the walk closes the database and opens it again, so nothing
// of the counts survives but what the file holds.
func TestCeilings(t *testing.T) {
	var mu sync.Mutex
	dirs := map[registrar.Backend]string{}
	backendtest.RunCeilings(t, func(t *testing.T) registrar.Backend {
		dir := filepath.Join(t.TempDir(), "state")
		b := openBackend(t, dir, embedded.Options{})
		mu.Lock()
		dirs[b] = dir
		mu.Unlock()
		return b
	}, backendtest.CeilingOptions{
		Restart: func(t *testing.T, b registrar.Backend) registrar.Backend {
			mu.Lock()
			dir := dirs[b]
			mu.Unlock()
			if err := b.(*embedded.Backend).Close(); err != nil {
				t.Fatal(err)
			}
			again := openBackend(t, dir, embedded.Options{})
			mu.Lock()
			dirs[again] = dir
			mu.Unlock()
			return again
		},
	})
}
