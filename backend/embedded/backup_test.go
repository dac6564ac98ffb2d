package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// checkSnapshot runs bbolt's consistency check (every page reachable once,
// no page both free and in use) on a snapshot.
func checkSnapshot(t *testing.T, snapshot []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "check.db")
	if err := os.WriteFile(path, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("the snapshot does not open as a bbolt database: %v", err)
	}
	defer db.Close()
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
