//go:build unix

package audit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// BenchmarkIdentityCheck measures the identity check every write path runs
// (lstat of the directory and of the active path, compared with the open
// ones) beside the durable append it guards (write + fsync, check
// included), on the same file system, so the check's share of an append is
// their ratio. Run both in one invocation with -count for an interleaved
// comparison.
func BenchmarkIdentityCheck(b *testing.B) {
	b.Run("append_fsynced", func(b *testing.B) {
		s, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		r := intent("bench.1")
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Append(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check_only", func(b *testing.B) {
		s, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			if changed, err := s.IdentityCheck(); changed || err != nil {
				b.Fatal(changed, err)
			}
		}
	})
}
