//go:build unix

package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// FuzzScanDirectory fills a record directory with entries named by the
// input (one name per line; a name ending in "/" is a directory) and checks
// the enumeration's invariants: the scan never fails or panics on a
// readable directory, every entry is either read or listed as skipped
// exactly once, a missing active file in a non-empty directory is always an
// anomaly, and every generation gap names a generation.
func FuzzScanDirectory(f *testing.F) {
	f.Add("registrar-audit.jsonl\nregistrar-audit-20260823T120000Z-000001.jsonl\nregistrar-audit-20260823T120001Z-000003.jsonl")
	f.Add("registrar-audit.jsonl.1\nnotes.txt\nsub/")
	f.Add("registrar-audit-20260823T120000Z-999999.jsonl\nregistrar-audit-20260823T120001Z-000000.jsonl\nregistrar-audit-20260823T115959Z-000004.jsonl/")
	f.Add("registrar-audit.jsonl/\nregistrar-audit-99999999T999999Z-000001.jsonl")
	f.Fuzz(func(t *testing.T, names string) {
		dir := filepath.Join(t.TempDir(), "audit")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		made := map[string]bool{}
		for i, name := range strings.Split(names, "\n") {
			if i == 32 {
				break
			}
			isDir := strings.HasSuffix(name, "/")
			name = strings.TrimSuffix(name, "/")
			if name == "" || name == "." || name == ".." || len(name) > 200 || strings.ContainsAny(name, "/\x00") || made[name] {
				continue
			}
			p := filepath.Join(dir, name)
			var err error
			if isDir {
				err = os.Mkdir(p, 0o700)
			} else {
				err = os.WriteFile(p, []byte(goodIntent+"\n"), 0o600)
			}
			if err != nil {
				continue // a name the file system refuses
			}
			made[name] = true
		}
		rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		seen := map[string]int{}
		for _, n := range rep.Files {
			seen[n]++
		}
		for _, s := range rep.Skipped {
			seen[s.Name]++
			if s.Reason == "" {
				t.Errorf("skipped %s without a reason", s.Name)
			}
		}
		for n := range made {
			if seen[n] != 1 {
				t.Errorf("entry %q accounted for %d times (files %v, skipped %+v)", n, seen[n], rep.Files, rep.Skipped)
			}
		}
		if len(seen) != len(made) {
			t.Errorf("report names %d entries, the directory has %d", len(seen), len(made))
		}
		activeRead := false
		for _, n := range rep.Files {
			activeRead = activeRead || n == audit.ActiveFileName
		}
		missing := false
		for _, a := range rep.StoreAnomalies {
			switch a.Kind {
			case audit.AnomalyMissingActiveFile:
				missing = true
			case audit.AnomalyGenerationGap:
				if !strings.HasPrefix(a.File, "registrar-audit-") || a.Detail == "" {
					t.Errorf("gap anomaly %+v", a)
				}
			}
		}
		if want := len(made) > 0 && !activeRead; missing != want {
			t.Errorf("missing_active_file reported %v, want %v (made %v)", missing, want, made)
		}
		if len(rep.StoreAnomalies) > 0 && !rep.Anomalies() {
			t.Error("store anomalies without Anomalies()")
		}
	})
}
