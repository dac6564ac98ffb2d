package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

func opFor(i int) registrar.MintOp {
	op := baseOp()
	op.RegistrationID = fmt.Sprintf("web%d-collector", i)
	op.Host = fmt.Sprintf("web%d", i)
	return op
}

// restore writes a snapshot as a fresh state directory's database and
// opens it.
func restore(t *testing.T, snapshot []byte) *embedded.Backend {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, embedded.FileName), snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	return openBackend(t, dir, embedded.Options{})
}

// openSnapshot opens a copy of snapshot read-only with bbolt, closed at
// the end of the test.
func openSnapshot(t *testing.T, snapshot []byte) *bolt.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("the snapshot does not open as a bbolt database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkSnapshot runs bbolt's consistency check (every page reachable once,
// no page both free and in use) on a snapshot.
func checkSnapshot(t *testing.T, snapshot []byte) {
	t.Helper()
	db := openSnapshot(t, snapshot)
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("the snapshot is inconsistent: %v", err)
	}
}

// TestBackupDuringMintsIsAConsistentSnapshot: backups taken while mints
// commit are each a consistent database holding every binding committed
// before the backup began, and a restore of one re-issues them all.
func TestBackupDuringMintsIsAConsistentSnapshot(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	for i := range 100 {
		mint(t, b, opFor(i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var mintErr error
	go func() { // a wave of new registrations while the backups run
		defer wg.Done()
		for i := 100; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := b.Mint(context.Background(), opFor(i)); err != nil {
				mintErr = err
				return
			}
		}
	}()
	var snapshots [][]byte
	for range 20 {
		var buf bytes.Buffer
		n, err := b.Backup(&buf)
		if err != nil {
			t.Fatalf("Backup: %v", err)
		}
		if n != int64(buf.Len()) {
			t.Fatalf("Backup returned %d bytes, wrote %d", n, buf.Len())
		}
		snapshots = append(snapshots, buf.Bytes())
	}
	close(stop)
	wg.Wait()
	if mintErr != nil {
		t.Fatalf("a mint during the backups failed: %v", mintErr)
	}
	for _, s := range snapshots {
		checkSnapshot(t, s)
	}
	r := restore(t, snapshots[len(snapshots)-1])
	for i := range 100 {
		if st, _ := mint(t, r, opFor(i)); st != registrar.MintReissued {
			t.Fatalf("remint of %s after the restore: %v, want reissued", opFor(i).RegistrationID, st)
		}
	}
}

func TestBackupFileRefusesADatabaseTheDaemonHolds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	b := openBackend(t, dir, embedded.Options{})
	for i := range 3 {
		mint(t, b, opFor(i))
	}
	var buf bytes.Buffer
	if _, err := embedded.BackupFile(dir, &buf, time.Millisecond); !errors.Is(err, embedded.ErrLocked) {
		t.Fatalf("BackupFile of a held database: %v, want ErrLocked", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Backup(&buf); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("Backup after Close: %v, want ErrClosed", err)
	}
	buf.Reset()
	if _, err := embedded.BackupFile(dir, &buf, time.Second); err != nil {
		t.Fatalf("BackupFile of a closed database: %v", err)
	}
	checkSnapshot(t, buf.Bytes())
	r := restore(t, buf.Bytes())
	for i := range 3 {
		if _, ok := binding(t, r, opFor(i).RegistrationID); !ok {
			t.Errorf("binding %s missing from the copy", opFor(i).RegistrationID)
		}
	}
	if _, err := embedded.BackupFile(filepath.Join(t.TempDir(), "none"), &buf, time.Second); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BackupFile of a missing database: %v, want fs.ErrNotExist", err)
	}
}

// gateWriter is the backup's destination in
// TestBackupHoldsItsSnapshotWhileCommitsRewriteTheFile: its first Write
// (bbolt's first meta page) announces itself on started and then waits for
// release, so the test commits while the backup is half written.
type gateWriter struct {
	buf      bytes.Buffer
	started  chan struct{}
	release  chan struct{}
	blocking bool // the first Write has not happened yet
}

func newGateWriter() *gateWriter {
	return &gateWriter{started: make(chan struct{}), release: make(chan struct{}), blocking: true}
}

func (w *gateWriter) Write(p []byte) (int, error) {
	n, _ := w.buf.Write(p)
	if w.blocking {
		w.blocking = false
		close(w.started)
		<-w.release
	}
	return n, nil
}

// dump lists every bucket, key and value of a snapshot, sorted, one per
// line: two snapshots hold the same registry exactly when their dumps are
// equal.
func dump(t *testing.T, snapshot []byte) string {
	t.Helper()
	db := openSnapshot(t, snapshot)
	var lines []string
	var walk func(prefix string, bk *bolt.Bucket) error
	walk = func(prefix string, bk *bolt.Bucket) error {
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", bk.Bucket(k))
			}
			lines = append(lines, fmt.Sprintf("%s%s=%x", prefix, k, v))
			return nil
		})
	}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error { return walk(string(name)+"/", bk) })
	})
	if err != nil {
		t.Fatalf("reading the snapshot: %v", err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestBackupHoldsItsSnapshotWhileCommitsRewriteTheFile: a backup that is
// half written while hundreds of write transactions commit (new
// registrations that grow the file, remints that rewrite the pages the
// snapshot is made of, deregistrations that free them) is still the
// registry exactly as it was when the backup began, and a valid bbolt
// database. A copy of the file without the read transaction would read
// the first pages of one state and the rest of another (bbolt reuses the
// freed pages once no reader holds them).
func TestBackupHoldsItsSnapshotWhileCommitsRewriteTheFile(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	const kept = 200
	for i := range kept {
		mint(t, b, opFor(i))
	}
	// Churn before the backup: free pages the commits during the backup
	// allocate from, so they need not grow bbolt's memory map (a remap
	// waits for the backup's read transaction, see Backup).
	for i := 1000; i < 1600; i++ {
		mint(t, b, opFor(i))
	}
	for i := 1000; i < 1600; i++ {
		if _, err := b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: opFor(i).RegistrationID, Host: opFor(i).Host}); err != nil {
			t.Fatal(err)
		}
	}
	var before bytes.Buffer
	if _, err := b.Backup(&before); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	want := dump(t, before.Bytes())

	w := newGateWriter()
	done := make(chan error, 1)
	go func() {
		_, err := b.Backup(w)
		done <- err
	}()
	release := sync.OnceFunc(func() { close(w.release) })
	defer release() // a failure below must not leave Close waiting on the backup
	<-w.started
	churned := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for i := range kept {
			var err error
			switch i % 4 {
			case 0: // a remint rewrites the identity's page
				_, _, err = b.Mint(ctx, opFor(i))
			case 1: // a deregistration frees it
				_, err = b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: opFor(i).RegistrationID, Host: opFor(i).Host})
			default: // new registrations grow the tree
				_, _, err = b.Mint(ctx, opFor(5000+i))
			}
			if err != nil {
				churned <- err
				return
			}
		}
		churned <- nil
	}()
	select {
	case err := <-churned:
		if err != nil {
			t.Fatalf("a commit during the backup: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the commits during the backup did not finish within a minute: one waits on the backup's read transaction (a memory map growth?)")
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Backup: %v", err)
	}
	checkSnapshot(t, w.buf.Bytes())
	if got := dump(t, w.buf.Bytes()); got != want {
		t.Fatalf("the backup is not the registry as of its start:\n%s", diffLines(want, got))
	}
	r := restore(t, w.buf.Bytes())
	for i := range kept {
		if _, ok := binding(t, r, opFor(i).RegistrationID); !ok {
			t.Errorf("binding %s, deregistered during the backup, is missing from it", opFor(i).RegistrationID)
		}
	}
	if _, ok := binding(t, r, opFor(5002).RegistrationID); ok {
		t.Errorf("binding %s, created during the backup, is in it", opFor(5002).RegistrationID)
	}
}

// diffLines names the first lines only one of two dumps has (a few).
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) && len(out) < 5 {
			out = append(out, "missing: "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) && len(out) < 10 {
			out = append(out, "extra:   "+l)
		}
	}
	return fmt.Sprintf("%d lines before, %d in the backup\n%s", len(w), len(g), strings.Join(out, "\n"))
}
