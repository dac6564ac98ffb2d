package audit

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strings"
)

// The sealing key's file: the evolving key, kept in registrar.state_dir.
//
// `registrar-otel audit seal init` creates it (CreateSealKey) with the
// first epoch's key, which it prints once as the verification key for the
// operator to keep off the host; its presence turns sealing on (the daemon
// opens it with OpenSealKey and hands it to the store, Options.Seal). From
// then on it holds only the current epoch's key: each time the store ends
// an epoch it writes the next key to a new file, renames it over this one
// (openat and renameat on the state directory's descriptor, held open since
// start, never a path), and overwrites the replaced file's bytes before
// letting go of it. 60 bytes:
//
//	magic "RGOSEAL1" | key id (8 bytes) | epoch (uint64, little endian) |
//	key (32 bytes) | CRC-32C of the 56 bytes before it
//
// A file that does not read back so (torn, damaged, another file put at
// the name) is refused with a *SealKeyError: the daemon does not start on
// a key it cannot trust, and does not seal with one it made up.

// SealKeyFileName is the sealing key's file name in registrar.state_dir.
const SealKeyFileName = "audit-seal.key"

// sealKeyTemp is the name a new key is written to before it replaces the
// file.
const sealKeyTemp = SealKeyFileName + ".new"

const sealKeyFileBytes = 8 + keyIDBytes + 8 + SealKeyBytes + 4

var sealKeyMagic = [8]byte{'R', 'G', 'O', 'S', 'E', 'A', 'L', '1'}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// SealKey is the sealing key as its file holds it: the key's identifier,
// the current epoch and that epoch's key. The store that is given one
// owns it (and overwrites it as the key evolves). A SealKey is not safe
// for concurrent use.
type SealKey struct {
	dir   *os.File // the state directory, held open by the caller
	id    string
	epoch uint64
	key   [SealKeyBytes]byte
}

// SealKeyError is a sealing key file that cannot be used: what is wrong
// with it. It matches ErrSealKey.
type SealKeyError struct {
	// Name is the file's name in the state directory.
	Name string
	// Problem says what is wrong.
	Problem string
}

func (e *SealKeyError) Error() string {
	return fmt.Sprintf("audit: sealing key file %s %s", e.Name, e.Problem)
}

// Is makes a *SealKeyError match ErrSealKey.
func (e *SealKeyError) Is(target error) bool { return target == ErrSealKey }

// ErrSealKey matches every *SealKeyError.
var ErrSealKey = errors.New("audit: unusable sealing key file")

// ErrSealKeyExists is CreateSealKey's answer when the directory already
// holds a key file.
var ErrSealKeyExists = errors.New("audit: the sealing key file already exists")

// ID returns the key's identifier: 16 lowercase hex digits, derived from
// the first epoch's key, the same for every epoch.
func (k *SealKey) ID() string { return k.id }

// Epoch returns the epoch whose key the file holds.
func (k *SealKey) Epoch() uint64 { return k.epoch }

// OpenSealKey reads the sealing key file in the state directory dir (open,
// checked private by the caller, and kept open: the store writes the
// evolved keys through it). It returns nil and no error when there is no
// key file: sealing is off. The file must be a regular file (never
// followed if a symlink) and read back whole; otherwise the error is a
// *SealKeyError.
func OpenSealKey(dir *os.File) (*SealKey, error) {
	f, err := openIn(dir, SealKeyFileName, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		var nr *notRegularError
		if errors.As(err, &nr) {
			return nil, &SealKeyError{Name: SealKeyFileName, Problem: "is not a regular file (" + nr.mode.Type().String() + ")"}
		}
		if errors.Is(err, errSymlink) {
			return nil, &SealKeyError{Name: SealKeyFileName, Problem: "is a symbolic link"}
		}
		return nil, fmt.Errorf("audit: opening the sealing key file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, &SealKeyError{Name: SealKeyFileName, Problem: fmt.Sprintf("has mode %#o: anyone but its owner may read it (want 0600)", st.Mode().Perm())}
	}
	var b [sealKeyFileBytes + 1]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("audit: reading the sealing key file: %w", err)
	}
	defer clear(b[:])
	k, perr := decodeSealKey(b[:n])
	if perr != "" {
		return nil, &SealKeyError{Name: SealKeyFileName, Problem: perr}
	}
	k.dir = dir
	return k, nil
}

// CheckSealKey is OpenSealKey for a check that does not seal (config
// check): it reads the key file in dir as the daemon would at start and
// returns the key's identifier and epoch, with the key erased from memory.
// ok is false when dir holds no key file (the store is not sealed).
func CheckSealKey(dir *os.File) (id string, epoch uint64, ok bool, err error) {
	k, err := OpenSealKey(dir)
	if k == nil || err != nil {
		return "", 0, false, err
	}
	defer k.clear()
	return k.id, k.epoch, true, nil
}

// decodeSealKey decodes a key file's bytes, or says what is wrong.
func decodeSealKey(b []byte) (*SealKey, string) {
	if len(b) != sealKeyFileBytes {
		return nil, fmt.Sprintf("holds %d bytes, not %d (torn or damaged)", len(b), sealKeyFileBytes)
	}
	if [8]byte(b[:8]) != sealKeyMagic {
		return nil, "does not start with the key file's magic (RGOSEAL1)"
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crc32c) != sum {
		return nil, "fails its CRC-32C (torn or damaged)"
	}
	k := &SealKey{id: hex.EncodeToString(b[8 : 8+keyIDBytes]), epoch: binary.LittleEndian.Uint64(b[8+keyIDBytes:])}
	copy(k.key[:], b[8+keyIDBytes+8:])
	return k, ""
}

// encode returns the file's bytes for epoch and key.
func (k *SealKey) encode(epoch uint64, key *[SealKeyBytes]byte) []byte {
	b := make([]byte, 0, sealKeyFileBytes)
	b = append(b, sealKeyMagic[:]...)
	b, _ = hex.AppendDecode(b, []byte(k.id))
	b = binary.LittleEndian.AppendUint64(b, epoch)
	b = append(b, key[:]...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32c))
}

// CreateSealKey creates the sealing key file in the state directory dir
// with a first key read from random (crypto/rand.Reader), at epoch 0, and
// returns that key in hex (the verification key, to be kept off the host)
// and the key's identifier. It refuses (ErrSealKeyExists) when a key file
// is there already: a store is sealed once, with one key.
func CreateSealKey(dir *os.File, random io.Reader) (verification, id string, err error) {
	if f, err := openIn(dir, SealKeyFileName, os.O_RDONLY, 0); err == nil {
		f.Close()
		return "", "", ErrSealKeyExists
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%w: %s is there but cannot be opened (%v)", ErrSealKeyExists, SealKeyFileName, err)
	}
	k := &SealKey{dir: dir}
	if _, err := io.ReadFull(random, k.key[:]); err != nil {
		return "", "", fmt.Errorf("audit: reading a random sealing key: %w", err)
	}
	defer k.clear()
	k.id = keyID(&k.key)
	if err := k.replace(0, &k.key, true); err != nil {
		return "", "", err
	}
	return hex.EncodeToString(k.key[:]), k.id, nil
}

// ParseVerificationKey reads a verification key: 64 hex digits, in either
// case, optionally grouped by '-' or white space.
func ParseVerificationKey(s string) ([SealKeyBytes]byte, error) {
	var k [SealKeyBytes]byte
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	if len(clean) != 2*SealKeyBytes {
		return k, fmt.Errorf("audit: a verification key is %d hex digits; got %d", 2*SealKeyBytes, len(clean))
	}
	if _, err := hex.Decode(k[:], []byte(clean)); err != nil {
		return k, errors.New("audit: a verification key is hex digits only")
	}
	return k, nil
}

// KeyID returns the identifier of the key whose verification key is k.
func KeyID(k *[SealKeyBytes]byte) string { return keyID(k) }

// store makes epoch and key the file's content, replacing the previous
// one and overwriting its bytes, and remembers them.
func (k *SealKey) store(epoch uint64, key *[SealKeyBytes]byte) error {
	if err := k.replace(epoch, key, false); err != nil {
		return err
	}
	k.epoch = epoch
	if &k.key != key {
		k.key = *key
	}
	return nil
}

// replace writes epoch and key to a new file and renames it over the key
// file (create: CreateSealKey found none), then overwrites the old file's
// bytes. The directory is fsynced after the rename, so the new key is
// durable before the old one is erased.
func (k *SealKey) replace(epoch uint64, key *[SealKeyBytes]byte, create bool) error {
	b := k.encode(epoch, key)
	defer clear(b)
	if err := removeIn(k.dir, sealKeyTemp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit: sealing key: removing a leftover %s: %w", sealKeyTemp, err)
	}
	f, err := openIn(k.dir, sealKeyTemp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("audit: sealing key: creating %s: %w", sealKeyTemp, err)
	}
	werr := f.Chmod(0o600)
	if werr == nil {
		_, werr = f.Write(b)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		removeIn(k.dir, sealKeyTemp)
		return fmt.Errorf("audit: sealing key: writing %s: %w", sealKeyTemp, werr)
	}
	var old *os.File
	if !create {
		// Held across the rename, so its bytes can be overwritten once
		// nothing names them.
		old, _ = openIn(k.dir, SealKeyFileName, os.O_RDWR, 0)
	}
	if err := renameIn(k.dir, sealKeyTemp, SealKeyFileName); err != nil {
		if old != nil {
			old.Close()
		}
		removeIn(k.dir, sealKeyTemp)
		return fmt.Errorf("audit: sealing key: replacing %s: %w", SealKeyFileName, err)
	}
	serr := k.dir.Sync()
	if old != nil {
		if serr == nil {
			scrub(old)
		}
		old.Close()
	}
	if serr != nil {
		return fmt.Errorf("audit: sealing key: fsync of the state directory after replacing %s: %w", SealKeyFileName, serr)
	}
	return nil
}

// scrub overwrites an unlinked key file's bytes with zeros and syncs
// them, so the old key is not left in the file system's free blocks (on
// a file system that writes in place).
func scrub(f *os.File) {
	var zero [sealKeyFileBytes]byte
	if _, err := f.WriteAt(zero[:], 0); err == nil {
		_ = f.Sync()
	}
}

// clear overwrites the key in memory.
func (k *SealKey) clear() { clear(k.key[:]) }

// errSymlink is a key file name that is a symbolic link.
var errSymlink = errors.New("is a symbolic link")

// notRegularError is a key file name that holds something other than a
// regular file.
type notRegularError struct{ mode fs.FileMode }

func (e *notRegularError) Error() string {
	return "not a regular file (" + e.mode.Type().String() + ")"
}

// regular returns f when it is a regular file; else it closes f.
func regular(f *os.File) (*os.File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &notRegularError{mode: st.Mode()}
	}
	return f, nil
}
