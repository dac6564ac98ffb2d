// Package subid reads a subordinate user id file (/etc/subuid, subuid(5)):
// which account owns which range of user ids, so that a uid the kernel
// reports for a process in a user namespace can be traced back to the
// account that made the namespace with newuidmap.
//
// The file is read the way shadow-utils' newuidmap reads it, or refused:
// each line is name:start:count, blank lines and lines starting with '#'
// say nothing. Where newuidmap would read a line in a way this package
// might not (strtoul's hexadecimal, octal, signs and spaces, a fourth
// field), the line is malformed here rather than read differently: a
// range the daemon does not see is a range whose uids escape their
// owner's identity, so doubt is an error for the operator to resolve, not
// a guess.
package subid

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// MaxLineBytes bounds a line, its newline excluded. newuidmap ignores a
// line of 1024 bytes or more; here it is malformed.
const MaxLineBytes = 1023

// MaxFileBytes bounds the file Load reads: about 260 000 lines of a
// 64-byte name, far beyond a host's accounts.
const MaxFileBytes = 16 << 20

// maxErrors bounds the problems one Parse reports (the rest are counted).
const maxErrors = 10

// The kinds of problem, for errors.Is on a *LineError.
var (
	// ErrMalformed: the line is not name:start:count with a non-empty
	// name and canonical decimal numbers, count at least 1 and the range
	// within the 32-bit uids.
	ErrMalformed = errors.New("subid: malformed line")
	// ErrOverlap: two ranges share a uid, so its owner is ambiguous.
	ErrOverlap = errors.New("subid: overlapping ranges")
	// ErrTooLarge: the file is longer than MaxFileBytes.
	ErrTooLarge = errors.New("subid: file too large")
)

// LineError is one problem of one line.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Kind is ErrMalformed or ErrOverlap.
	Kind error
	// Problem says what is wrong, worded to follow "line N: ".
	Problem string
}

func (e *LineError) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Problem }

// Unwrap returns Kind.
func (e *LineError) Unwrap() error { return e.Kind }

// Range is one line's range of subordinate uids, First to Last inclusive.
type Range struct {
	// Name is the owner field as written: a user name or a decimal uid.
	Name string
	// Owner is the owner's uid; meaningful only when Resolved.
	Owner uint32
	// Resolved is false for a name no account has (see Map.Unresolved).
	Resolved    bool
	First, Last uint32
	// Line is the 1-based line number.
	Line int
}

// Contains reports whether uid is in r.
func (r Range) Contains(uid uint32) bool { return r.First <= uid && uid <= r.Last }

// Resolver returns the uid of the account named name; ok is false when no
// account has that name, err is for a lookup that failed (the name may
// exist).
type Resolver func(name string) (uid uint32, ok bool, err error)

// LookupUser is the Resolver of the host's accounts (os/user).
func LookupUser(name string) (uint32, bool, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, unknown := errors.AsType[user.UnknownUserError](err); unknown {
			return 0, false, nil
		}
		return 0, false, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("user %s has the uid %q, not a 32-bit number", name, u.Uid)
	}
	return uint32(uid), true, nil
}

// Map is a subordinate uid file, read: its ranges sorted and
// non-overlapping. The zero Map and a nil *Map have no ranges. A Map is
// not modified after Parse: safe for concurrent use.
type Map struct {
	// ranges are the resolved ranges, sorted by First.
	ranges []Range
	// unresolved are the ranges whose owner no account has.
	unresolved []Range
	// exempt are uids never mapped (Exempt).
	exempt []uint32
}

// Owner returns the owner of the range holding uid, and true; or false
// when no resolved range holds it, or uid is exempt (Exempt). It takes
// O(log n) for n ranges, beside a scan of the few exempt uids.
func (m *Map) Owner(uid uint32) (uint32, bool) {
	if m == nil || slices.Contains(m.exempt, uid) {
		return 0, false
	}
	// The first range that ends at or after uid is the only one that may
	// hold it: the ranges are sorted and do not overlap.
	i, _ := slices.BinarySearchFunc(m.ranges, uid, func(r Range, uid uint32) int {
		if r.Last < uid {
			return -1
		}
		return 1
	})
	if i < len(m.ranges) && m.ranges[i].First <= uid {
		return m.ranges[i].Owner, true
	}
	return 0, false
}

// Len is the number of resolved ranges.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.ranges)
}

// Ranges returns the resolved ranges, sorted by First.
func (m *Map) Ranges() []Range {
	if m == nil {
		return nil
	}
	return slices.Clone(m.ranges)
}

// Unresolved returns the ranges whose owner name no account had when the
// file was read, in line order. Their uids belong to no one (newuidmap
// grants them to no caller either); the daemon warns about them, since
// an account created later under that name gets them only once the file
// is read again.
func (m *Map) Unresolved() []Range {
	if m == nil {
		return nil
	}
	return slices.Clone(m.unresolved)
}

// Exemption is a range Exempt kept apart from a uid.
type Exemption struct {
	Range Range
	// UID is the exempt uid.
	UID uint32
	// Owned: UID owns Range, whose uids now stay themselves; otherwise
	// Range holds UID, which stays itself.
	Owned bool
}

// Exempt returns a Map like m that never maps one of uids, nor to one of
// them: a range one of them owns is left out (its uids stay themselves),
// and a uid of uids inside a range stays itself. The daemon exempts its
// operators (root and its own uid), whose identities are unrestricted: a
// subordinate uid mapped to one would take its rights, and an operator
// mapped to an account would lose them. It also returns what it left
// out, in line order, for a warning. m is not changed.
func (m *Map) Exempt(uids ...uint32) (*Map, []Exemption) {
	if m == nil {
		return nil, nil
	}
	out := &Map{unresolved: m.unresolved, exempt: slices.Concat(m.exempt, uids)}
	var ex []Exemption
	for _, r := range m.ranges {
		if i := slices.Index(uids, r.Owner); i >= 0 {
			ex = append(ex, Exemption{Range: r, UID: uids[i], Owned: true})
			continue
		}
		out.ranges = append(out.ranges, r)
	}
	for _, r := range slices.Concat(out.ranges, m.unresolved) {
		for _, uid := range uids {
			if r.Contains(uid) {
				ex = append(ex, Exemption{Range: r, UID: uid})
			}
		}
	}
	slices.SortStableFunc(ex, func(a, b Exemption) int { return a.Range.Line - b.Range.Line })
	return out, ex
}

// Load reads the file at path with the host's accounts (LookupUser). The
// error is the open's or the read's (*fs.PathError), or Parse's prefixed
// with the path.
func Load(path string) (*Map, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Parse(io.LimitReader(f, MaxFileBytes+1), LookupUser)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse reads a subordinate uid file from r, resolving owner names with
// resolve (a decimal owner is its own uid). It returns every problem at
// once, joined, each a *LineError (at most 10, then a count of the rest),
// or a read or resolver error, or ErrTooLarge past MaxFileBytes.
func Parse(r io.Reader, resolve Resolver) (*Map, error) {
	var (
		all   []Range
		probs problems
		read  int
	)
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		read += len(line)
		if read > MaxFileBytes {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxFileBytes)
		}
		long := errors.Is(err, bufio.ErrBufferFull)
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of a long line
			var more []byte
			more, err = br.ReadSlice('\n')
			read += len(more)
			if read > MaxFileBytes {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxFileBytes)
			}
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		text := strings.TrimSuffix(string(line), "\n")
		switch {
		case long || len(text) > MaxLineBytes:
			probs.add(&LineError{Line: n, Kind: ErrMalformed, Problem: fmt.Sprintf("longer than %d bytes", MaxLineBytes)})
		case isBlank(text) || strings.HasPrefix(strings.TrimLeft(text, " \t"), "#"):
		default:
			rg, perr := parseLine(text)
			if perr != "" {
				probs.add(&LineError{Line: n, Kind: ErrMalformed, Problem: perr})
				break
			}
			rg.Line = n
			if err := ownerOf(&rg, resolve); err != nil {
				return nil, fmt.Errorf("line %d: resolving the owner %q: %w", n, rg.Name, err)
			}
			all = append(all, rg)
		}
		if err == io.EOF {
			break
		}
	}
	checkOverlaps(all, &probs)
	if err := probs.err(); err != nil {
		return nil, err
	}
	m := &Map{}
	for _, rg := range all {
		if rg.Resolved {
			m.ranges = append(m.ranges, rg)
		} else {
			m.unresolved = append(m.unresolved, rg)
		}
	}
	slices.SortFunc(m.ranges, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	return m, nil
}

// parseLine reads name:start:count, or says what is wrong with it.
func parseLine(text string) (Range, string) {
	fields := strings.Split(text, ":")
	if len(fields) != 3 {
		return Range{}, fmt.Sprintf("has %d colon-separated fields, want 3 (name:start:count)", len(fields))
	}
	name := fields[0]
	if name == "" {
		return Range{}, "has an empty name"
	}
	if i := strings.IndexFunc(name, func(c rune) bool { return c <= ' ' || c == 0x7f }); i >= 0 {
		return Range{}, fmt.Sprintf("has a space or control character in the name %q", name)
	}
	if c := name[0]; c >= '0' && c <= '9' || c == '+' || c == '-' {
		if _, ok := decimal(name, math.MaxUint32); !ok {
			return Range{}, fmt.Sprintf("has the name %q, want an account name or a decimal uid (no sign or leading zero)", name)
		}
	}
	start, ok := decimal(fields[1], math.MaxUint32)
	if !ok {
		return Range{}, fmt.Sprintf("has the start %q, want a decimal uid (no sign, space or leading zero)", fields[1])
	}
	count, ok := decimal(fields[2], math.MaxUint32+1) // 0:4294967296 is every uid
	if !ok {
		return Range{}, fmt.Sprintf("has the count %q, want a decimal number (no sign, space or leading zero)", fields[2])
	}
	if count == 0 {
		return Range{}, "has the count 0: a range holds at least one uid"
	}
	if start+count-1 > math.MaxUint32 {
		return Range{}, fmt.Sprintf("has the range %d+%d, past the last uid %d", start, count, uint32(math.MaxUint32))
	}
	return Range{Name: name, First: uint32(start), Last: uint32(start + count - 1)}, ""
}

// decimal parses a canonical decimal number of at most max (and ten
// digits): digits only, no leading zero but for "0" itself. newuidmap's
// strtoul would read "010" as 8 and " 8" or "+8" as 8; refusing them
// leaves no reading to disagree on.
func decimal(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 10 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= max
}

// ownerOf sets rg's Owner and Resolved from its Name: a decimal name is
// the uid itself, any other is looked up.
func ownerOf(rg *Range, resolve Resolver) error {
	if uid, ok := decimal(rg.Name, math.MaxUint32); ok {
		rg.Owner, rg.Resolved = uint32(uid), true
		return nil
	}
	uid, ok, err := resolve(rg.Name)
	if err != nil {
		return err
	}
	rg.Owner, rg.Resolved = uid, ok
	return nil
}

// checkOverlaps adds a problem for every range that shares a uid with a
// range starting at or before it, naming both lines.
func checkOverlaps(all []Range, probs *problems) {
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	for i := 1; i < len(sorted); i++ {
		prev := &sorted[i-1] // the range reaching furthest so far
		cur := sorted[i]
		if cur.First <= prev.Last {
			probs.add(&LineError{Line: max(cur.Line, prev.Line), Kind: ErrOverlap,
				Problem: fmt.Sprintf("the range %d-%d of %s overlaps the range %d-%d of %s on line %d",
					later(cur, *prev).First, later(cur, *prev).Last, later(cur, *prev).Name,
					earlier(cur, *prev).First, earlier(cur, *prev).Last, earlier(cur, *prev).Name, min(cur.Line, prev.Line))})
			if cur.Last < prev.Last {
				sorted[i] = *prev // keep comparing with the one reaching further
			}
		}
	}
}

// later and earlier are, of two ranges, the one on the later line and the
// one on the earlier line.
func later(a, b Range) Range {
	if a.Line > b.Line {
		return a
	}
	return b
}

func earlier(a, b Range) Range {
	if a.Line > b.Line {
		return b
	}
	return a
}

func isBlank(s string) bool { return strings.Trim(s, " \t\r") == "" }

// problems collects a Parse's problems, the first maxErrors kept.
type problems struct {
	kept []error
	more int
}

func (p *problems) add(e *LineError) {
	if len(p.kept) == maxErrors {
		p.more++
		return
	}
	p.kept = append(p.kept, e)
}

func (p *problems) err() error {
	if p.more > 0 {
		return errors.Join(append(p.kept, fmt.Errorf("%w: and %d more problems", ErrMalformed, p.more))...)
	}
	return errors.Join(p.kept...)
}
