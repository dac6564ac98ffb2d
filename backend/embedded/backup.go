package embedded

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup writes a consistent snapshot of the open database to w, under one
// read transaction (bbolt's Tx.WriteTo): the registry as of that
// transaction's start, whatever write transactions commit meanwhile. It
// returns the bytes written.
//
// A read transaction never blocks a write transaction's commit; it blocks
// one only while bbolt must grow its memory map (a commit that outgrows the
// mapped size waits for the open read transactions to end), so the longest
// a mint can wait on a backup is the time to write the snapshot to w.
// Backup holds the backend's shared lock, so Close waits for it.
func (b *Backend) Backup(w io.Writer) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.db == nil {
		return 0, ErrClosed
	}
	var n int64
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("embedded: backup of %s: %w", b.path, err)
	}
	return n, nil
}

// BackupFile writes a consistent snapshot of the state database FileName in
// dir to w without a running daemon: it opens the file read-only (a shared
// lock, so no daemon can open it meanwhile) and writes it under one read
// transaction. A daemon holding the database makes it fail after timeout
// with an error matching ErrLocked; a missing file is an error matching
// fs.ErrNotExist.
func BackupFile(dir string, w io.Writer, timeout time.Duration) (int64, error) {
	if errPlatform != nil {
		return 0, errPlatform
	}
	path := filepath.Join(dir, FileName)
	if _, err := os.Lstat(path); err != nil {
		return 0, fmt.Errorf("embedded: backup: %w", err)
	}
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true, OpenFile: openFile})
	if errors.Is(err, berrors.ErrTimeout) {
		return 0, fmt.Errorf("%w: %s (gave up after %s; the daemon holds it: back up through its socket instead)", ErrLocked, path, timeout)
	}
	if err != nil {
		return 0, fmt.Errorf("embedded: backup: open %s: %w", path, err)
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("embedded: backup of %s: %w", path, err)
	}
	return n, nil
}
