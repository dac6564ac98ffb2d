//go:build unix

package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The attack of issue 27, item 3: a uid that could write the record
// directory deleted a generation and wrote a forged one, well-formed, and
// the scan said clean. The scan now reports every entry owned by neither
// root nor the store's owner, and every group- or world-writable one, the
// directory itself included, naming the path.
func TestScanReportsAForgedGenerationOfAnotherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	rec := line(t, intent("a"), now.Add(-time.Hour)) + line(t, outcome("a", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-time.Hour))
	dir := writeStore(t, rec)
	// The store is the daemon's (uid 65534); root scans it.
	must(t, os.Chown(dir, 65534, 65534))
	must(t, os.Chown(filepath.Join(dir, audit.ActiveFileName), 65534, 65534))
	if rep := scan(t, dir); rep.Anomalies() {
		t.Fatalf("the daemon's own store: anomalies %v, want clean", kinds(rep))
	}
	forged := gen("20260823T000000Z", "000001")
	must(t, os.WriteFile(filepath.Join(dir, forged), []byte(line(t, outcome("b", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-2*time.Hour))), 0o600))
	must(t, os.Chown(filepath.Join(dir, forged), 4242, 4242))

	rep := scan(t, dir)
	if !rep.Anomalies() {
		t.Fatalf("the forged generation scanned clean: %+v", rep)
	}
	if got := kinds(rep); !slices.Equal(got, []string{"wrong_owner " + forged}) {
		t.Errorf("anomalies %q, want only wrong_owner of %s", got, forged)
	}
	a := rep.StoreAnomalies[len(rep.StoreAnomalies)-1]
	want := filepath.Join(dir, forged) + " is owned by uid 4242, not by root or the store's owner (uid 65534)"
	if !strings.HasPrefix(a.Detail, want) {
		t.Errorf("detail %q, want it to start %q", a.Detail, want)
	}

	// Scanned by the daemon's uid itself, the same.
	if got := kinds(scanAs(t, dir, 65534)); !slices.Equal(got, []string{"wrong_owner " + forged}) {
		t.Errorf("scanned as uid 65534: %q, want the forged file", got)
	}
	// The daemon's uid finds a directory given to another uid, which root
	// cannot tell from the daemon's.
	must(t, os.Chown(dir, 4242, 4242))
	if got := kinds(scanAs(t, dir, 65534)); !slices.Contains(got, "wrong_owner "+audit.DirFile) {
		t.Errorf("a directory of uid 4242 scanned as 65534: %q, want wrong_owner of %s", got, audit.DirFile)
	}
}

// scanAs scans dir judging ownership as uid would.
func scanAs(t *testing.T, dir string, uid int) *audit.Report {
	t.Helper()
	rep, err := audit.ScanAsEUID(context.Background(), audit.ScanOptions{Dir: dir, Now: now}, uid)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rep
}

func TestScanReportsAGroupOrWorldWritableDirectoryOrFile(t *testing.T) {
	dir := writeStore(t, line(t, intent("a"), now.Add(-time.Hour))+line(t, outcome("a", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-time.Hour)))
	must(t, os.Chmod(dir, 0o777))
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600))
	must(t, os.Chmod(filepath.Join(dir, "notes.txt"), 0o620))
	must(t, os.Chmod(filepath.Join(dir, audit.ActiveFileName), 0o602))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "elsewhere"))) // 0777 by nature: not an anomaly of mode

	rep := scan(t, dir)
	got := kinds(rep)
	slices.Sort(got)
	want := []string{"unsafe_mode " + audit.DirFile, "unsafe_mode " + audit.ActiveFileName, "unsafe_mode notes.txt"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("anomalies %q, want %q", got, want)
	}
	for _, a := range rep.StoreAnomalies {
		if a.File == audit.DirFile && a.Detail != dir+" has mode 0777 (group- or world-writable): any uid of that group or every local uid may have changed it" {
			t.Errorf("directory detail %q", a.Detail)
		}
	}
	must(t, os.Chmod(dir, 0o700))
	must(t, os.Chmod(filepath.Join(dir, "notes.txt"), 0o600))
	must(t, os.Chmod(filepath.Join(dir, audit.ActiveFileName), 0o600))
	if rep := scan(t, dir); rep.Anomalies() {
		t.Errorf("put right: anomalies %q, want clean", kinds(rep))
	}
}
