package audit

import (
	"slices"
	"strconv"
	"strings"
)

// idSet is a set of request ids that costs about two bytes per id for the
// ids the registrar issues ("<prefix>.<sequence>": one prefix per daemon
// start, a sequence counting up), so that a scan can remember every id it
// has finished with in memory that stays small however long the store. Any
// other id is kept as a string. It is not safe for concurrent use.
type idSet struct {
	seqs   map[string]*seqSet // by prefix, '.' included
	others map[string]struct{}
	// last is the prefix of the last id seen: ids come in runs of one
	// prefix, so the map lookup is usually skipped.
	lastPrefix string
	last       *seqSet
}

// splitID splits a registrar-issued id into its prefix (up to and
// including the last '.') and its sequence number, written in canonical
// decimal. ok is false for any other id.
func splitID(id string) (prefix string, seq uint64, ok bool) {
	dot := strings.LastIndexByte(id, '.')
	if dot < 0 || dot == len(id)-1 || len(id)-dot-1 > 20 {
		return "", 0, false
	}
	digits := id[dot+1:]
	if digits[0] == '0' && len(digits) > 1 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return id[:dot+1], n, true
}

func (s *idSet) seqsFor(prefix string, create bool) *seqSet {
	if s.last != nil && s.lastPrefix == prefix {
		return s.last
	}
	ss := s.seqs[prefix]
	if ss == nil {
		if !create {
			return nil
		}
		if s.seqs == nil {
			s.seqs = make(map[string]*seqSet)
		}
		prefix = strings.Clone(prefix) // the id may share a line's memory
		ss = &seqSet{}
		s.seqs[prefix] = ss
	}
	s.lastPrefix, s.last = prefix, ss
	return ss
}

// has reports whether id is in the set.
func (s *idSet) has(id string) bool {
	if prefix, seq, ok := splitID(id); ok {
		ss := s.seqsFor(prefix, false)
		return ss != nil && ss.has(seq)
	}
	_, ok := s.others[id]
	return ok
}

// add puts id in the set.
func (s *idSet) add(id string) {
	if prefix, seq, ok := splitID(id); ok {
		s.seqsFor(prefix, true).add(seq)
		return
	}
	if s.others == nil {
		s.others = make(map[string]struct{})
	}
	s.others[strings.Clone(id)] = struct{}{}
}

// seqSet is a set of uint64s in chunks of 2^16 consecutive values: a
// sorted array of the low 16 bits while a chunk holds few, a bitmap
// (8 KiB) once it holds many.
type seqSet struct {
	chunks map[uint64]*seqChunk
	// lastHi/lastChunk short-cut the map for runs in one chunk.
	lastHi    uint64
	lastChunk *seqChunk
}

type seqChunk struct {
	sorted []uint16
	bitmap *[1024]uint64
}

// maxSorted is where a chunk turns into a bitmap: 4096 two-byte entries
// are the bitmap's size.
const maxSorted = 4096

func (s *seqSet) chunk(hi uint64, create bool) *seqChunk {
	if s.lastChunk != nil && s.lastHi == hi {
		return s.lastChunk
	}
	c := s.chunks[hi]
	if c == nil {
		if !create {
			return nil
		}
		if s.chunks == nil {
			s.chunks = make(map[uint64]*seqChunk)
		}
		c = &seqChunk{}
		s.chunks[hi] = c
	}
	s.lastHi, s.lastChunk = hi, c
	return c
}

func (s *seqSet) has(n uint64) bool {
	c := s.chunk(n>>16, false)
	if c == nil {
		return false
	}
	lo := uint16(n)
	if c.bitmap != nil {
		return c.bitmap[lo>>6]&(1<<(lo&63)) != 0
	}
	_, found := slices.BinarySearch(c.sorted, lo)
	return found
}

func (s *seqSet) add(n uint64) {
	c := s.chunk(n>>16, true)
	lo := uint16(n)
	if c.bitmap != nil {
		c.bitmap[lo>>6] |= 1 << (lo & 63)
		return
	}
	// Ids arrive nearly in order: appending is the common case.
	if k := len(c.sorted); k == 0 || c.sorted[k-1] < lo {
		c.sorted = append(c.sorted, lo)
	} else if i, found := slices.BinarySearch(c.sorted, lo); !found {
		c.sorted = slices.Insert(c.sorted, i, lo)
	}
	if len(c.sorted) > maxSorted {
		c.bitmap = new([1024]uint64)
		for _, v := range c.sorted {
			c.bitmap[v>>6] |= 1 << (v & 63)
		}
		c.sorted = nil
	}
}
