package embedded

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// FileName is the database file's name inside the state directory.
const FileName = "registrar.db"

// DefaultOpenTimeout is how long Open waits for the database's lock when
// Options.OpenTimeout is not set.
const DefaultOpenTimeout = time.Second

var (
	_ registrar.Backend = (*Backend)(nil)
	_ registrar.Lister  = (*Backend)(nil)
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Rand is the source of role ids and wrapped secret ids; nil means
	// crypto/rand.Reader. It is read only inside write transactions, which
	// bbolt serialises, so it need not be safe for concurrent use.
	Rand io.Reader
	// Logger receives the backend's few operational messages (open, close);
	// nil discards them. No message ever carries a secret.
	Logger *slog.Logger
	// OpenTimeout bounds how long Open waits for the database's exclusive
	// lock held by another process; zero or negative means
	// DefaultOpenTimeout. Below bbolt's 50 ms retry step it means a single
	// attempt.
	OpenTimeout time.Duration
}

// Backend is the embedded registrar.Backend: bindings and identities in a
// bbolt database. It is safe for concurrent use; every method after Close
// returns ErrClosed.
type Backend struct {
	// mu is held shared by every operation and exclusively by Close, so
	// that Close waits for the operations in flight.
	mu sync.RWMutex
	db *bolt.DB // nil once closed
	// group is the commit queue (group.go) of the operations waiting for
	// the next shared write transaction.
	group   *groupcommit.Queue[planFunc]
	commits atomic.Uint64 // write transactions committed, for tests
	rand    io.Reader
	log     *slog.Logger
	path    string
}

// Binding is what a registration id is bound to, with its identity's
// current validity. It never carries the wrapped secret id or its hash.
type Binding struct {
	Host   string
	Spec   registrar.Spec
	RoleID string
	// Owner is the caller identity of the first mint, "" for a binding
	// stored before owners were recorded.
	Owner string
	// CreatedAt is the first mint's Now (UTC, milliseconds).
	CreatedAt time.Time
	// IssuedAt and ExpiresAt are the current wrapped secret's last mint's
	// Now and Now + WrapTTL (UTC, milliseconds).
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Open opens (creating if needed) the state database FileName in dir.
//
// A directory it creates is chmodded to 0700 whatever the umask; an
// existing one must not be a symlink, something other than a directory, or
// group/world-writable (an *UnsafeStateError names it). The database file
// is opened without following a symlink and restated to mode 0600.
//
// bbolt holds an exclusive flock on the file while it is open, so a second
// Open of the same dir (another daemon, or this one twice) waits at most
// opts.OpenTimeout and then fails with an error matching ErrLocked that
// names the file.
func Open(dir string, opts Options) (*Backend, error) {
	if errPlatform != nil {
		return nil, errPlatform
	}
	if dir == "" {
		return nil, errors.New("embedded: state directory (registrar.state_dir) is empty")
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	timeout := opts.OpenTimeout
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, OpenFile: openFile})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (gave up after %s; is another registrar running on this state_dir?)", ErrLocked, path, timeout)
	}
	if _, ok := errors.AsType[*UnsafeStateError](err); ok {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketBindings, bucketIdentities} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	r := opts.Rand
	if r == nil {
		r = rand.Reader
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{db: db, rand: r, log: logger.With("state_db", path), path: path}
	b.group = groupcommit.New(maxGroup, b.commitGroup)
	b.log.Info("state database opened")
	return b, nil
}

// prepareDir validates (creating if missing) the state directory. The
// rules are privdir's; the errors are the backend's.
func prepareDir(dir string) error {
	d, _, err := privdir.Open(dir, privdir.Options{Owner: true, Ancestors: true})
	if err == nil {
		d.Close() // only the checks were wanted; bbolt opens the file by name
		return nil
	}
	if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
		return &UnsafeStateError{Path: dir, Problem: ue.Detail()}
	}
	se, ok := errors.AsType[*privdir.StepError](err)
	if !ok {
		return err
	}
	switch se.Step {
	case privdir.StepCreate:
		return fmt.Errorf("embedded: creating state directory: %w", err)
	case privdir.StepOpen:
		return fmt.Errorf("embedded: opening state directory: %w", err)
	case privdir.StepChmod:
		return fmt.Errorf("embedded: restating state directory mode: %w", err)
	}
	return fmt.Errorf("embedded: state directory: %w", err) // lstat, fstat
}

// openFile is bbolt's file opener: it never follows a symlink, refuses
// anything but a regular file, and restates the mode to 0600 whatever the
// umask or an earlier chmod.
func openFile(name string, flag int, _ os.FileMode) (*os.File, error) {
	fi, err := os.Lstat(name)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &UnsafeStateError{Path: name, Problem: "is a symlink"}
	}
	f, err := os.OpenFile(name, flag|oNoFollow|oNonBlock, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &UnsafeStateError{Path: name, Problem: "is not a regular file"}
	}
	if err == nil && st.Mode().Perm() != 0o600 {
		err = f.Chmod(0o600)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Close closes the database, after the operations in flight, releasing its
// lock. Closing a closed Backend returns nil.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.db == nil {
		return nil
	}
	err := b.db.Close()
	b.db = nil
	if err != nil {
		return fmt.Errorf("embedded: close %s: %w", b.path, err)
	}
	b.log.Info("state database closed")
	return nil
}

// Mint implements registrar.Backend in one write transaction: when it
// returns, bbolt has fsynced the commit. A ctx already done returns
// ctx.Err() without touching the database; a started transaction is not
// cancelled. Material is the zero value unless the status is MintCreated or
// MintReissued. A remint replaces the previous wrapped secret's hash, so
// the previous secret no longer verifies. op.MayAct is asked inside the
// transaction, first thing once the binding is read; op.Reserve, when
// there is none, before anything is written (a refusal is
// MintCeilingReached and writes nothing). Either may be asked again if the
// shared transaction is re-run (group.go).
func (b *Backend) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if err := checkMint(op); err != nil {
		return 0, registrar.Material{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.db == nil {
		return 0, registrar.Material{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, registrar.Material{}, err
	}
	var (
		status registrar.MintStatus
		mat    registrar.Material
	)
	if err := b.update(b.mintPlan(op, &status, &mat)); err != nil {
		return 0, registrar.Material{}, fmt.Errorf("embedded: mint %q: %w", op.RegistrationID, err)
	}
	return status, mat, nil
}

// mintPlan is Mint's operation in the shared write transaction: it sets
// *status and *mat from the run that commits.
func (b *Backend) mintPlan(op registrar.MintOp, status *registrar.MintStatus, mat *registrar.Material) planFunc {
	key := []byte(op.RegistrationID)
	return func(bindings, identities *bolt.Bucket) ([]mutation, error) {
		*status, *mat = 0, registrar.Material{}
		now := stamp(op.Now)
		var muts []mutation
		var rec bindingRecord
		if raw := bindings.Get(key); raw == nil {
			// The reservation is part of the transaction: it judges the
			// absence this run read, and a refusal writes nothing.
			if !op.Reserves() {
				*status = registrar.MintCeilingReached
				return nil, nil
			}
			rec = bindingRecord{V: recordVersion, Host: op.Host, Spec: toSpecRecord(op.Spec), CreatedAt: now, Owner: op.Owner}
			var err error
			if rec.RoleID, err = newRoleID(b.rand); err != nil {
				return nil, err
			}
			m, err := put(bindings, key, rec)
			if err != nil {
				return nil, err
			}
			muts = append(muts, m)
			*status = registrar.MintCreated
		} else {
			var err error
			if rec, err = decodeBinding(op.RegistrationID, raw); err != nil {
				return nil, err
			}
			// Ownership first: a caller that may not act learns
			// nothing else of the binding.
			if !op.Permits(rec.Owner) {
				*status = registrar.MintNotOwner
				return nil, nil
			}
			if rec.Host != op.Host {
				*status = registrar.MintCollision
				return nil, nil
			}
			if rec.Spec.spec() != op.Spec {
				*status = registrar.MintSpecConflict
				return nil, nil
			}
			// Decode the identity being replaced: corruption is reported,
			// never papered over by the overwrite.
			id, err := decodeIdentity(op.RegistrationID, identities.Get(key))
			if err == nil && id.RoleID != rec.RoleID {
				err = &CorruptRecordError{Bucket: bucketIdentities, Key: op.RegistrationID, Err: errors.New("role_id disagrees with the binding's")}
			}
			if err != nil {
				return nil, err
			}
			*status = registrar.MintReissued
		}
		secret, sum, err := newSecret(b.rand)
		if err != nil {
			return nil, err
		}
		id := identityRecord{V: recordVersion, RoleID: rec.RoleID, SecretSHA256: sum, ExpiresAt: stamp(op.Now.Add(op.WrapTTL)), IssuedAt: now}
		m, err := put(identities, key, id)
		if err != nil {
			return nil, err
		}
		*mat = registrar.Material{RoleID: rec.RoleID, WrappedSecretID: secret, ExpiresAt: id.ExpiresAt}
		return append(muts, m), nil
	}
}

// Deregister implements registrar.Backend in one write transaction, with
// Mint's durability, context and ownership rules.
func (b *Backend) Deregister(ctx context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	if op.RegistrationID == "" || op.Host == "" {
		return 0, fmt.Errorf("%w: empty registration id or host", ErrInvalidOp)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.db == nil {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var status registrar.DeregisterStatus
	key := []byte(op.RegistrationID)
	err := b.update(func(bindings, identities *bolt.Bucket) ([]mutation, error) {
		status = 0
		raw := bindings.Get(key)
		if raw == nil {
			status = registrar.DeregisterAbsent
			return nil, nil
		}
		rec, err := decodeBinding(op.RegistrationID, raw)
		if err != nil {
			return nil, err
		}
		if !op.Permits(rec.Owner) {
			status = registrar.DeregisterNotOwner
			return nil, nil
		}
		if rec.Host != op.Host {
			status = registrar.DeregisterHostMismatch
			return nil, nil
		}
		// The identity is not decoded: removing it needs nothing from it,
		// and a removal is how an operator gets rid of a corrupt one.
		status = registrar.DeregisterRemoved
		return []mutation{{bk: bindings, key: key}, {bk: identities, key: key}}, nil
	})
	if err != nil {
		return 0, fmt.Errorf("embedded: deregister %q: %w", op.RegistrationID, err)
	}
	return status, nil
}

// Binding reads registrationID's binding in a read-only transaction; ok is
// false when there is none. It is for tests and operators.
func (b *Backend) Binding(registrationID string) (bnd Binding, ok bool, err error) {
	err = b.view(func(bindings, identities *bolt.Bucket) error {
		key := []byte(registrationID)
		raw := bindings.Get(key)
		if raw == nil {
			return nil
		}
		rec, err := decodeBinding(registrationID, raw)
		if err != nil {
			return err
		}
		id, err := decodeIdentity(registrationID, identities.Get(key))
		if err != nil {
			return err
		}
		bnd = Binding{Host: rec.Host, Spec: rec.Spec.spec(), RoleID: rec.RoleID, Owner: rec.Owner, CreatedAt: rec.CreatedAt, IssuedAt: id.IssuedAt, ExpiresAt: id.ExpiresAt}
		ok = true
		return nil
	})
	if err != nil {
		return Binding{}, false, fmt.Errorf("embedded: binding %q: %w", registrationID, err)
	}
	return bnd, ok, nil
}

// Registrations implements registrar.Lister: every binding, decoded, in
// one read-only transaction (a consistent snapshot: a commit meanwhile is
// not seen), in key order. A binding that does not decode stops it with a
// *CorruptRecordError naming its key: a registry that cannot be read is not
// counted by guess. fn runs inside the transaction and must not call the
// backend.
func (b *Backend) Registrations(ctx context.Context, fn func(registrar.Registration) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.view(func(bindings, _ *bolt.Bucket) error {
		return bindings.ForEach(func(k, raw []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			id := string(k)
			rec, err := decodeBinding(id, raw)
			if err != nil {
				return err
			}
			return fn(registrar.Registration{ID: id, Host: rec.Host, Component: rec.Spec.Component, Owner: rec.Owner})
		})
	})
	if err != nil {
		return fmt.Errorf("embedded: listing the registrations: %w", err)
	}
	return nil
}

// VerifySecret reports whether wrappedSecretID is registrationID's current
// wrapped secret id and now is before its expiry. It does not consume the
// secret: single use is enforced by the unwrap endpoint that will consume
// it, not by this check. An unknown registration id is false, not an error.
func (b *Backend) VerifySecret(registrationID, wrappedSecretID string, now time.Time) (bool, error) {
	var valid bool
	err := b.view(func(_, identities *bolt.Bucket) error {
		raw := identities.Get([]byte(registrationID))
		if raw == nil {
			return nil
		}
		id, err := decodeIdentity(registrationID, raw)
		if err != nil {
			return err
		}
		match := subtle.ConstantTimeCompare([]byte(hashSecret(wrappedSecretID)), []byte(id.SecretSHA256)) == 1
		valid = match && now.Before(id.ExpiresAt)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("embedded: verify secret %q: %w", registrationID, err)
	}
	return valid, nil
}

// view runs fn in a read-only transaction.
func (b *Backend) view(fn func(bindings, identities *bolt.Bucket) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.db == nil {
		return ErrClosed
	}
	return b.db.View(func(tx *bolt.Tx) error {
		bindings, identities, err := buckets(tx)
		if err != nil {
			return err
		}
		return fn(bindings, identities)
	})
}

func buckets(tx *bolt.Tx) (bindings, identities *bolt.Bucket, err error) {
	bindings, identities = tx.Bucket([]byte(bucketBindings)), tx.Bucket([]byte(bucketIdentities))
	if bindings == nil || identities == nil {
		return nil, nil, errors.New("bucket missing from the state database")
	}
	return bindings, identities, nil
}

// put is the mutation storing v's JSON under key in bk.
func put(bk *bolt.Bucket, key []byte, v any) (mutation, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return mutation{}, err
	}
	return mutation{bk: bk, key: key, val: raw}, nil
}

func checkMint(op registrar.MintOp) error {
	switch {
	case op.RegistrationID == "" || op.Host == "":
		return fmt.Errorf("%w: empty registration id or host", ErrInvalidOp)
	case op.WrapTTL <= 0:
		return fmt.Errorf("%w: wrap TTL %s is not positive", ErrInvalidOp, op.WrapTTL)
	case op.Now.IsZero():
		return fmt.Errorf("%w: Now is zero", ErrInvalidOp)
	}
	return nil
}
