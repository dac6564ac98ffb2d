//go:build unix

package audit_test

// The file cap at its boundary: a line that exactly fills what is left of
// the active file is written there, in the same write as the lines before
// it in its commit; a sealed store counts each line's chain value, and a
// seal due before the next write, so no file passes the cap.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

func marshalled(t *testing.T, r *audit.Record) uint64 {
	t.Helper()
	r.TS = t0
	b, err := audit.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(len(b))
}

// recordDirFiles returns every file of the record directory and its size.
func recordDirFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			got[e.Name()] = fi.Size()
		}
	}
	return got
}

// A line of exactly the cap is accepted, and written alone.
func TestALineOfExactlyTheCapIsWritten(t *testing.T) {
	r := intent("q1")
	n := marshalled(t, r)
	s, dir := openStore(t, audit.Options{MaxFileBytes: n}, audit.TestHooks{MinFileBytes: 1})
	if err := s.Append(context.Background(), r); err != nil {
		t.Fatalf("Append of a line of exactly MaxFileBytes (%d): %v, want it written", n, err)
	}
	if got := uint64(len(readActive(t, dir))); got != n {
		t.Errorf("active file %d bytes, want the line's %d", got, n)
	}
}

// Two lines that exactly fill the cap share the active file, and, in one
// commit, one write.
func TestLinesThatExactlyFillTheCapShareTheFileAndTheWrite(t *testing.T) {
	r1, r2 := intent("q1"), intent("q2")
	n := marshalled(t, r1) + marshalled(t, r2)
	t.Run("appended one by one", func(t *testing.T) {
		s, dir := openStore(t, audit.Options{MaxFileBytes: n}, audit.TestHooks{MinFileBytes: 1})
		appendOK(t, s, r1)
		appendOK(t, s, r2)
		if got := recordDirFiles(t, dir); len(got) != 1 || uint64(got[audit.ActiveFileName]) != n {
			t.Errorf("files %v, want the active file alone with both lines (%d bytes): no rotation", got, n)
		}
	})
	t.Run("one commit", func(t *testing.T) {
		var f faults
		th := f.hooks()
		th.MinFileBytes = 1
		s, dir := openStore(t, audit.Options{MaxFileBytes: n}, th)
		for i, err := range s.AppendBatch(context.Background(), []*audit.Record{r1, r2}) {
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		if f.writes != 1 {
			t.Errorf("%d writes, want the two lines in one", f.writes)
		}
		if got := uint64(len(readActive(t, dir))); got != n {
			t.Errorf("active file %d bytes, want %d", got, n)
		}
	})
}

// A sealed store's files stay within the cap, their chain values and
// their seals counted: records of varied lengths, an epoch ending (a seal
// due) before every other one, across many rotations.
func TestASealedStoresFilesStayWithinTheCap(t *testing.T) {
	f := newSealFixture(t)
	f.maxFile, f.retained = 4096, 1000
	s := f.open()
	for i := range 120 {
		if i%2 == 1 {
			f.clock.Set(f.clock.Now().Add(audit.SealInterval))
		}
		r := intent(fmt.Sprintf("z.%d", i))
		r.CallerIdentity = "unix-peer:uid=" + strings.Repeat("7", i%37)
		appendOK(t, s, r)
		f.head(s)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := recordDirFiles(t, f.dir)
	if len(files) < 10 {
		t.Fatalf("%d files, want many rotations", len(files))
	}
	for name, size := range files {
		if size > int64(f.maxFile) {
			t.Errorf("%s is %d bytes, past the cap of %d", name, size, f.maxFile)
		}
	}
	f.mustVerify(f.heads())
}

// A head published after a commit that began with a seal says the epoch
// its lines were chained in: the one after the seal.
func TestTheHeadAfterASealSaysTheNewEpoch(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	defer s.Close()
	appendOK(t, s, intent("e1"))
	before, ok := s.SealHead()
	if !ok {
		t.Fatal("no head")
	}
	f.clock.Set(f.clock.Now().Add(audit.SealInterval))
	appendOK(t, s, intent("e2")) // the interval seal, then the line
	after, _ := s.SealHead()
	if after.Epoch != before.Epoch+1 {
		t.Errorf("head epoch %d after the seal, want %d (the epoch its line was chained in)", after.Epoch, before.Epoch+1)
	}
}

// A rollback whose fsync succeeds logs nothing: the warning is for a failed
// one.
func TestASuccessfulRollbackLogsNoWarning(t *testing.T) {
	var f faults
	var logs bytes.Buffer
	s, _ := openStore(t, audit.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, f.hooks())
	appendOK(t, s, intent("q1"))
	f.set(func(f *faults) { f.failWrite = true })
	if err := s.Append(context.Background(), intent("q2")); err == nil {
		t.Fatal("Append with a failing write succeeded")
	}
	f.set(func(f *faults) { f.failWrite = false })
	appendOK(t, s, intent("q3"))
	if strings.Contains(logs.String(), "rolling back") {
		t.Errorf("logged %q after a rollback whose fsync succeeded", logs.String())
	}
	f.set(func(f *faults) { f.failWrite, f.failSync = true, true })
	_ = s.Append(context.Background(), intent("q4"))
	if !strings.Contains(logs.String(), "rolling back") {
		t.Errorf("no warning after a rollback whose fsync failed; logs %q", logs.String())
	}
}

// padded returns an intent whose line is exactly n bytes, padding its
// caller identity and service name (each at most MaxFieldBytes).
func padded(t *testing.T, id string, n uint64) *audit.Record {
	t.Helper()
	r := intent(id)
	base := marshalled(t, r)
	if n < base {
		t.Fatalf("an intent of %d bytes is shorter than the least, %d", n, base)
	}
	extra := n - base
	a := min(extra, audit.MaxFieldBytes-uint64(len(r.CallerIdentity)))
	r.CallerIdentity += strings.Repeat("9", int(a))
	r.Requested.ServiceName += strings.Repeat("s", int(extra-a))
	if got := marshalled(t, r); got != n {
		t.Fatalf("padded intent is %d bytes, want %d", got, n)
	}
	return r
}

// A line that exactly fills what retention's rotated records leave of the
// fresh file is written there, without another rotation. The rotated
// records' size is learned from a first run with a shorter line, then the
// same store is built again and given a line of exactly the room.
func TestALineThatExactlyFillsTheFileAfterRetentionIsWrittenThere(t *testing.T) {
	const capBytes = 1500
	run := func(lineBytes func(active uint64) uint64) (active uint64, files map[string]int64) {
		dir := filepath.Join(t.TempDir(), "audit")
		s, _ := openStore(t, audit.Options{Dir: dir, MaxFileBytes: capBytes, MaxRetainedFiles: 1}, audit.TestHooks{MinFileBytes: 1})
		for i := range 30 {
			appendOK(t, s, intent(fmt.Sprintf("p%03d", i)))
		}
		for i := 0; ; i++ { // fill the active file until the next intent would not fit
			r := intent(fmt.Sprintf("f%03d", i))
			if s.Size()+marshalled(t, r) > capBytes {
				break
			}
			appendOK(t, s, r)
		}
		appendOK(t, s, padded(t, "x", lineBytes(s.Size())))
		files = recordDirFiles(t, dir)
		return uint64(files[audit.ActiveFileName]), files
	}
	const probe = 300
	active, probeFiles := run(func(before uint64) uint64 {
		if before+probe <= capBytes {
			t.Fatalf("the probe's line fits in the active file (%d bytes): it must rotate it", before)
		}
		return probe
	})
	rotated := active - probe // the fresh file's rotated records
	if rotated == 0 || rotated+probe > capBytes {
		t.Fatalf("after the probe's rotation the active file is %d bytes: want rotated records and the probe's line", active)
	}
	active, files := run(func(uint64) uint64 { return capBytes - rotated })
	if active != capBytes || len(files) != len(probeFiles) {
		t.Errorf("active file %d bytes, %d files (probe: %d); want the line in the file retention left, %d bytes, and no other rotation",
			active, len(files), len(probeFiles), capBytes)
	}
}
