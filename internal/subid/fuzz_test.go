package subid_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/subid"
)

// naiveRange is the reference's reading of one line.
type naiveRange struct {
	owner    uint32
	resolved bool
	first    uint64
	last     uint64
}

var (
	naiveLine = regexp.MustCompile(`^([^:\x00-\x20\x7f]+):(0|[1-9][0-9]*):(0|[1-9][0-9]*)$`)
	naiveUID  = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// naiveParse is the reference: a regular expression per line, big
// integers, an O(n²) overlap check. It reports only whether the file is
// valid, and its ranges.
func naiveParse(text string) ([]naiveRange, bool) {
	if len(text) > subid.MaxFileBytes {
		return nil, false
	}
	lines := strings.Split(text, "\n")
	var out []naiveRange
	for _, l := range lines {
		if len(l) > subid.MaxLineBytes {
			return nil, false
		}
		trimmed := strings.TrimLeft(l, " \t")
		if strings.Trim(l, " \t\r") == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		m := naiveLine.FindStringSubmatch(l)
		if m == nil {
			return nil, false
		}
		start, err1 := strconv.ParseUint(m[2], 10, 64)
		count, err2 := strconv.ParseUint(m[3], 10, 64)
		if err1 != nil || err2 != nil || count == 0 || start+count-1 > 1<<32-1 {
			return nil, false
		}
		r := naiveRange{first: start, last: start + count - 1}
		name := m[1]
		switch {
		case naiveUID.MatchString(name):
			uid, err := strconv.ParseUint(name, 10, 64)
			if err != nil || uid > 1<<32-1 {
				return nil, false
			}
			r.owner, r.resolved = uint32(uid), true
		case name[0] >= '0' && name[0] <= '9' || name[0] == '+' || name[0] == '-':
			return nil, false
		default:
			r.owner, r.resolved = accounts[name], accounts[name] != 0 || name == "root"
		}
		out = append(out, r)
	}
	for i := range out {
		for j := range i {
			if out[i].first <= out[j].last && out[j].first <= out[i].last {
				return nil, false
			}
		}
	}
	return out, true
}

func naiveOwner(rs []naiveRange, uid uint32) (uint32, bool) {
	for _, r := range rs {
		if r.resolved && r.first <= uint64(uid) && uint64(uid) <= r.last {
			return r.owner, true
		}
	}
	return 0, false
}

// FuzzParseAgreesWithANaiveReading: Parse never panics, accepts exactly
// the files the reference accepts, and Owner answers as a linear scan of
// the reference's ranges, at uid and at every range's bounds and their
// neighbours.
func FuzzParseAgreesWithANaiveReading(f *testing.F) {
	for _, seed := range []string{
		"", "alice:100000:65536\n", "alice:100000:65536\nbob:165536:65536\n",
		"# c\n\nroot:1:1\n1002:5:5\n", "alice:4294967295:1\n", "alice:0:4294967296\n",
		"alice:100000:10\nbob:100009:10\n", "ghost:7:7\nalice:14:1\n", "alice:010:1\n",
		"alice: 1:1\n", "alice:1:1:1\n", "01000:1:1\n", "alice:1:0\n", "alice:1:1\r\n",
		"bob:300:1\nalice:100:1\n1005:200:1\n", "alice:100:1000\nbob:200:1\nbob:500:1\n",
	} {
		f.Add(seed, uint32(100000))
	}
	f.Fuzz(func(t *testing.T, text string, uid uint32) {
		m, err := subid.Parse(strings.NewReader(text), resolve)
		ref, ok := naiveParse(text)
		if (err == nil) != ok {
			t.Fatalf("Parse(%q) error = %v; the reference accepts it: %v", text, err, ok)
		}
		if err != nil {
			var le *subid.LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse(%q) error %v carries no *LineError", text, err)
			}
			return
		}
		probes := []uint32{uid, 0, 1<<32 - 1}
		for _, r := range ref {
			probes = append(probes, uint32(r.first), uint32(r.last), uint32(r.first)-1, uint32(r.last)+1)
		}
		for _, p := range probes {
			gotOwner, gotOK := m.Owner(p)
			wantOwner, wantOK := naiveOwner(ref, p)
			if gotOwner != wantOwner || gotOK != wantOK {
				t.Fatalf("Parse(%q).Owner(%d) = %d, %v; the reference says %d, %v", text, p, gotOwner, gotOK, wantOwner, wantOK)
			}
		}
		if n := m.Len() + len(m.Unresolved()); n != len(ref) {
			t.Fatalf("Parse(%q) has %d ranges, the reference %d", text, n, len(ref))
		}
	})
}
