package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// dirRules are the record directory's privdir rules: the owner and the
// ancestors too, since whoever may change the directory may delete and
// forge generations (issue 27).
var dirRules = privdir.Options{Owner: true, Ancestors: true}

// openDir validates (creating if missing) the record directory and returns
// it open, for directory fsyncs, with its identity. The rules are privdir's;
// the errors are the store's.
func openDir(path string) (*os.File, fs.FileInfo, error) {
	d, st, err := privdir.Open(path, dirRules)
	if err == nil {
		return d, st, nil
	}
	if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
		return nil, nil, &UnsafeStoreError{Path: path, Problem: ue.Detail()}
	}
	se, ok := errors.AsType[*privdir.StepError](err)
	if !ok {
		return nil, nil, err
	}
	switch se.Step {
	case privdir.StepCreate:
		return nil, nil, fmt.Errorf("audit: creating record directory: %w", err)
	case privdir.StepStat:
		return nil, nil, fmt.Errorf("audit: record directory: %w", err)
	case privdir.StepOpen:
		return nil, nil, fmt.Errorf("audit: opening record directory: %w", err)
	}
	return nil, nil, se.Err // fstat, chmod: the *fs.PathError says it
}

// openActive opens the existing active file in the directory open as dirf,
// or creates it, and returns it with its identity and size. The store is
// not modified: the caller installs the result.
func (s *Store) openActive(dirf *os.File) (*os.File, fs.FileInfo, uint64, error) {
	p := filepath.Join(s.dir, ActiveFileName)
	fi, err := os.Lstat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, fmt.Errorf("audit: active file: %w", err)
	}
	if exists {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, 0, &UnsafeStoreError{Path: p, Problem: "is a symlink"}
		}
		if !fi.Mode().IsRegular() {
			return nil, nil, 0, &UnsafeStoreError{Path: p, Problem: "is not a regular file"}
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("audit: opening active file: %w", err)
	}
	st, size, err := s.checkActive(dirf, f, p, fi, exists)
	if err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	return f, st, size, nil
}

// install makes f (already checked) the active file.
func (s *Store) install(f *os.File, id fs.FileInfo, size uint64) {
	s.f, s.raw, s.fileID, s.size = s.wrap(f), f, id, size
}

// checkActive verifies a just-opened active file and returns its identity
// and size, after terminating a torn final line.
func (s *Store) checkActive(dirf, f *os.File, p string, fi fs.FileInfo, existed bool) (fs.FileInfo, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("audit: active file: %w", err)
	}
	if !st.Mode().IsRegular() || (existed && !os.SameFile(fi, st)) {
		return nil, 0, &UnsafeStoreError{Path: p, Problem: "changed while being opened"}
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			return nil, 0, fmt.Errorf("audit: restating active file mode: %w", err)
		}
		if existed {
			s.log.Warn("audit active file mode tightened", "file", p, "was", fmt.Sprintf("%#o", perm))
		}
	}
	if !existed {
		if err := dirf.Sync(); err != nil {
			return nil, 0, fmt.Errorf("audit: fsync of record directory after creating the active file: %w", err)
		}
	}
	size := st.Size()
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return nil, 0, fmt.Errorf("audit: reading active file tail: %w", err)
		}
		if last[0] != '\n' {
			// A crash tore the last write. Keep its bytes as evidence but
			// end the line, so no record is ever appended onto it.
			if _, err := f.Write([]byte{'\n'}); err != nil {
				return nil, 0, fmt.Errorf("audit: terminating torn final line: %w", err)
			}
			if err := f.Sync(); err != nil {
				return nil, 0, fmt.Errorf("audit: terminating torn final line: %w", err)
			}
			size++
			s.log.Warn("audit active file ended in a torn line; terminated it (the scan reports it malformed)", "file", p)
		}
	}
	return st, uint64(size), nil
}

// createActive creates a fresh active file after a rotation and returns it
// with its identity.
func (s *Store) createActive() (*os.File, fs.FileInfo, error) {
	p := filepath.Join(s.dir, ActiveFileName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func (s *Store) wrap(f *os.File) file {
	if s.h.wrapFile != nil {
		return s.h.wrapFile(f)
	}
	return f
}
