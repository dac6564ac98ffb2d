package embedded

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("embedded: backend is closed")

	// ErrLocked is returned by Open when another process (or another Open
	// in this one) holds the state database's lock past Options.OpenTimeout:
	// typically a second daemon on the same registrar.state_dir.
	ErrLocked = errors.New("embedded: state database is locked by another process")

	// ErrUnsafeState matches *UnsafeStateError.
	ErrUnsafeState = errors.New("embedded: unsafe state directory")

	// ErrCorrupt matches *CorruptRecordError.
	ErrCorrupt = errors.New("embedded: corrupt record")

	// ErrInvalidOp is returned for an operation the verbs never send (an
	// empty registration id or host, a non-positive wrap TTL, a zero Now).
	ErrInvalidOp = errors.New("embedded: invalid operation")
)

// UnsafeStateError reports a state path that Open refuses to use. It
// matches ErrUnsafeState.
type UnsafeStateError struct {
	// Path is the refused directory or file.
	Path string
	// Problem says why, e.g. "is a symlink".
	Problem string
}

func (e *UnsafeStateError) Error() string {
	return fmt.Sprintf("embedded: refusing %s: %s", e.Path, e.Problem)
}

// Is makes an *UnsafeStateError match ErrUnsafeState.
func (e *UnsafeStateError) Is(target error) bool { return target == ErrUnsafeState }

// CorruptRecordError reports a stored value that cannot be decoded, or that
// contradicts its companion record. A corrupt record is never treated as
// absent: the operation fails and changes nothing. It matches ErrCorrupt.
type CorruptRecordError struct {
	// Bucket is "bindings" or "identities".
	Bucket string
	// Key is the registration id.
	Key string
	// Err says what is wrong.
	Err error
}

// Error has no package prefix: the methods always return it wrapped, as in
// `embedded: mint "web1-collector": corrupt record bindings/"web1-collector": ...`.
func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("corrupt record %s/%q: %v", e.Bucket, e.Key, e.Err)
}

func (e *CorruptRecordError) Unwrap() error { return e.Err }

// Is makes a *CorruptRecordError match ErrCorrupt.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorrupt }
