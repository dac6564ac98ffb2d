package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A rotated generation is named generationPrefix, the UTC stamp of its
// rotation, '-', a six-digit sequence, generationSuffix.
const (
	generationPrefix = "registrar-audit-"
	generationSuffix = ".jsonl"
	stampLayout      = "20060102T150405Z"
	maxSequence      = 999999
	generationLen    = len(generationPrefix) + len(stampLayout) + 1 + 6 + len(generationSuffix)
)

// rotate rotates the active file (rotateFile) and runs retention.
func (s *Store) rotate() error {
	if err := s.rotateFile(); err != nil {
		return err
	}
	s.retain()
	return nil
}

// rotateFile renames the active file to the next generation name and
// creates a new active file.
func (s *Store) rotateFile() error {
	active := filepath.Join(s.dir, ActiveFileName)
	var name string
	var stamp time.Time
	var seq int
	for tries := 0; ; tries++ {
		name, stamp, seq = s.nextGeneration()
		if _, err := os.Lstat(filepath.Join(s.dir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		// Never rename over an existing file: skip the occupied name.
		s.lastStamp, s.lastSeq = stamp, seq
		if tries == 8 {
			return &WriteError{Op: "rotate", Err: fmt.Errorf("no free generation name (last tried %s)", name)}
		}
	}
	gen := filepath.Join(s.dir, name)
	if err := s.h.rename(active, gen); err != nil {
		return &WriteError{Op: "rotate", Err: err}
	}
	s.lastStamp, s.lastSeq = stamp, seq
	if err := s.dirf.Sync(); err != nil {
		s.dirDirty = true
		s.log.Warn("audit fsync of record directory after rotation failed; retried before the next write", "err", err)
	}
	nf, nid, err := s.createActive()
	if err != nil {
		if rerr := s.h.rename(gen, active); rerr != nil {
			s.broken = fmt.Errorf("%w: rotated the active file to %s but could not create a new one (%v) nor restore it (%v)", ErrBroken, name, err, rerr)
			s.log.Error("audit rotation failed half-way; refusing further appends", "err", s.broken)
			return s.broken
		}
		return &WriteError{Op: "rotate", Err: err}
	}
	if err := s.f.Close(); err != nil {
		s.log.Warn("audit closing rotated generation failed", "file", name, "err", err)
	}
	s.install(nf, nid, 0)
	if s.seal != nil {
		// The new file opens with the seal of the epoch the old one
		// ends in, written before its first line (writeSync).
		s.seal.lines, s.seal.due = 0, SealReasonRotation
	}
	if err := s.dirf.Sync(); err != nil {
		s.dirDirty = true
		s.log.Warn("audit fsync of record directory after rotation failed; retried before the next write", "err", err)
	}
	s.log.Info("audit active file rotated", "generation", name)
	return nil
}

// nextGeneration returns the next generation name. The sequence is a
// generation number: one more than the last generation's, whatever the
// stamp, so a generation missing from the middle of the retained ones is a
// visible gap (audit scan reports it). Stamps never go backwards (a clock
// step back reuses the last stamp); when the number wraps from 999999 to 0
// the stamp moves on by at least a second, so names sort oldest first.
func (s *Store) nextGeneration() (string, time.Time, int) {
	stamp := s.now().UTC().Truncate(time.Second)
	if stamp.Before(s.lastStamp) {
		stamp = s.lastStamp
	}
	seq := s.lastSeq + 1
	if seq > maxSequence {
		seq = 0
		if !stamp.After(s.lastStamp) {
			stamp = s.lastStamp.Add(time.Second)
		}
	}
	return generationName(stamp, seq), stamp, seq
}

func generationName(stamp time.Time, seq int) string {
	b := make([]byte, 0, generationLen)
	b = append(b, generationPrefix...)
	b = stamp.AppendFormat(b, stampLayout)
	b = append(b, '-')
	b = fmt.Appendf(b, "%06d", seq)
	return string(append(b, generationSuffix...))
}

// parseGeneration parses a rotated generation's name.
func parseGeneration(name string) (time.Time, int, bool) {
	if len(name) != generationLen || name[:len(generationPrefix)] != generationPrefix ||
		name[len(name)-len(generationSuffix):] != generationSuffix {
		return time.Time{}, 0, false
	}
	rest := name[len(generationPrefix) : len(name)-len(generationSuffix)]
	stampText, seqText := rest[:len(stampLayout)], rest[len(stampLayout):]
	if seqText[0] != '-' {
		return time.Time{}, 0, false
	}
	seqText = seqText[1:]
	for i := 0; i < len(seqText); i++ {
		if seqText[i] < '0' || seqText[i] > '9' {
			return time.Time{}, 0, false
		}
	}
	seq, err := strconv.Atoi(seqText)
	if err != nil {
		return time.Time{}, 0, false
	}
	stamp, err := time.Parse(stampLayout, stampText)
	if err != nil || stamp.Format(stampLayout) != stampText {
		return time.Time{}, 0, false
	}
	return stamp, seq, true
}

// generations lists the rotated generations (regular files only), oldest
// first.
func (s *Store) generations() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("audit: listing record directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if _, _, ok := parseGeneration(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names, nil // os.ReadDir sorts by name, which is oldest first
}
