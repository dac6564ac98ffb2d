package audittest

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// OpenStore opens a real store in a fresh directory on the test's disk,
// with the real clock, closed at cleanup: sealed with a new key (made in
// a state directory beside it, as `registrar-otel audit seal init` does)
// or not. The benchmarks that compare sealed and unsealed stores share it,
// so that the two differ only in the key.
func OpenStore(tb testing.TB, sealed bool, maxFileBytes uint64) *audit.Store {
	tb.Helper()
	root := tb.TempDir()
	opts := audit.Options{Dir: filepath.Join(root, "audit"), MaxFileBytes: maxFileBytes}
	if sealed {
		state := filepath.Join(root, "state")
		if err := os.Mkdir(state, 0o700); err != nil {
			tb.Fatal(err)
		}
		d, err := os.Open(state)
		if err != nil {
			tb.Fatal(err)
		}
		defer d.Close()
		if _, _, err := audit.CreateSealKey(d, rand.Reader); err != nil {
			tb.Fatal(err)
		}
		if opts.Seal, err = audit.OpenSealKey(d); err != nil {
			tb.Fatal(err)
		}
	}
	s, err := audit.Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
