package subid_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/registrar-otel/registrar-otel/internal/subid"
)

// accounts is the fake host of the tests: three names and their uids.
var accounts = map[string]uint32{"root": 0, "alice": 1000, "bob": 1001}

func resolve(name string) (uint32, bool, error) {
	uid, ok := accounts[name]
	return uid, ok, nil
}

func parse(t *testing.T, text string) *subid.Map {
	t.Helper()
	m, err := subid.Parse(strings.NewReader(text), resolve)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return m
}

func TestOwnerFindsTheRangeAtItsExactBounds(t *testing.T) {
	m := parse(t, "alice:100000:65536\nbob:165536:10\n1002:200000:1\n")
	for _, c := range []struct {
		uid   uint32
		owner uint32
		ok    bool
	}{
		{99999, 0, false},
		{100000, 1000, true},
		{165535, 1000, true},
		{165536, 1001, true},
		{165545, 1001, true},
		{165546, 0, false},
		{199999, 0, false},
		{200000, 1002, true},
		{200001, 0, false},
		{1000, 0, false}, // the owner's own uid is no subordinate
		{0, 0, false},
		{math.MaxUint32, 0, false},
	} {
		owner, ok := m.Owner(c.uid)
		if owner != c.owner || ok != c.ok {
			t.Errorf("Owner(%d) = %d, %v; want %d, %v", c.uid, owner, ok, c.owner, c.ok)
		}
	}
	if m.Len() != 3 {
		t.Errorf("Len = %d, want 3", m.Len())
	}
}

func TestARangeMayReachTheLastUid(t *testing.T) {
	m := parse(t, "alice:4294967295:1\nbob:0:1\n")
	if owner, ok := m.Owner(math.MaxUint32); !ok || owner != 1000 {
		t.Errorf("Owner(max) = %d, %v; want 1000, true", owner, ok)
	}
	if owner, ok := m.Owner(0); !ok || owner != 1001 {
		t.Errorf("Owner(0) = %d, %v; want 1001, true", owner, ok)
	}
}

func TestNilAndEmptyMapsHoldNothing(t *testing.T) {
	var m *subid.Map
	if _, ok := m.Owner(100000); ok {
		t.Error("a nil Map found an owner")
	}
	if m.Len() != 0 || m.Ranges() != nil || m.Unresolved() != nil {
		t.Error("a nil Map is not empty")
	}
	e := parse(t, "")
	if _, ok := e.Owner(100000); ok || e.Len() != 0 {
		t.Error("an empty file gave ranges")
	}
}

func TestCommentsAndBlankLinesSayNothing(t *testing.T) {
	// A blank line of a CRLF file is blank; the last line needs no newline.
	m := parse(t, "# ranges\n\n   \r\n\t# indented comment\n#alice:1:1\nalice:100000:10")
	if owner, ok := m.Owner(100009); !ok || owner != 1000 {
		t.Errorf("Owner(100009) = %d, %v; want 1000, true", owner, ok)
	}
	if m.Len() != 1 {
		t.Errorf("Len = %d, want 1", m.Len())
	}
}

func TestMalformedLinesAreNamedWithTheirNumber(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"two fields", "alice:100000\n", "line 1: has 2 colon-separated fields, want 3"},
		{"four fields", "# c\nalice:100000:10:x\n", "line 2: has 4 colon-separated fields"},
		{"empty name", ":100000:10\n", "line 1: has an empty name"},
		{"space in name", "al ice:100000:10\n", "line 1: has a space or control character in the name"},
		{"leading space in name", " alice:100000:10\n", "line 1: has a space or control character"},
		{"numeric name with a leading zero", "01000:100000:10\n", `line 1: has the name "01000", want an account name or a decimal uid`},
		{"signed name", "+1000:100000:10\n", `line 1: has the name "+1000"`},
		{"name of a leading 9 not a number", "9lives:100000:10\n", `line 1: has the name "9lives", want an account name or a decimal uid`},
		{"hex start", "alice:0x186a0:10\n", `line 1: has the start "0x186a0", want a decimal uid`},
		{"octal start", "alice:0100000:10\n", `line 1: has the start "0100000"`},
		{"signed start", "alice:+100000:10\n", `line 1: has the start "+100000"`},
		{"spaced start", "alice: 100000:10\n", `line 1: has the start " 100000"`},
		{"empty start", "alice::10\n", `line 1: has the start ""`},
		{"start past 32 bits", "alice:4294967296:1\n", `line 1: has the start "4294967296"`},
		{"eleven digits", "alice:10000000000:1\n", `line 1: has the start "10000000000"`},
		{"negative count", "alice:100000:-1\n", `line 1: has the count "-1", want a decimal number`},
		{"CRLF", "alice:100000:10\r\n", `line 1: has the count "10\r"`},
		{"zero count", "alice:100000:0\n", "line 1: has the count 0"},
		{"range past the last uid", "alice:4294967295:2\n", "line 1: has the range 4294967295+2, past the last uid 4294967295"},
		{"long line", "alice:1:1\n" + strings.Repeat("a", 1020) + ":1:1\n", "line 2: longer than 1023 bytes"},
		{"very long line", strings.Repeat("a", 5000) + ":1:1\nalice:1:", "line 1: longer than 1023 bytes\nline 2: has the count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := subid.Parse(strings.NewReader(c.text), resolve)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, c.want)
			}
			if !errors.Is(err, subid.ErrMalformed) {
				t.Errorf("Parse error %v is not ErrMalformed", err)
			}
			var le *subid.LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Errorf("Parse error %v carries no *LineError with a line", err)
			}
		})
	}
}

func TestALineOfExactlyTheBoundIsRead(t *testing.T) {
	name := "a" + strings.Repeat("b", subid.MaxLineBytes-len("a:100000:10"))
	line := name + ":100000:10"
	if len(line) != subid.MaxLineBytes {
		t.Fatalf("test line is %d bytes, want %d", len(line), subid.MaxLineBytes)
	}
	m := parse(t, "1000:1:1\n"+line+"\n")
	if got := m.Unresolved(); len(got) != 1 || got[0].Name != name {
		t.Errorf("Unresolved = %+v, want the %d-byte line's range", got, subid.MaxLineBytes)
	}
}

func TestEveryProblemIsReportedAtOnceUpToTen(t *testing.T) {
	var b strings.Builder
	for range 12 {
		b.WriteString("x\n")
	}
	_, err := subid.Parse(strings.NewReader(b.String()), resolve)
	msg := fmt.Sprint(err)
	for _, want := range []string{"line 1: ", "line 10: ", "and 2 more problems"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "line 11: ") {
		t.Errorf("error %q names an eleventh line", msg)
	}
	_, err = subid.Parse(strings.NewReader("x\ny\n"), resolve)
	if msg := fmt.Sprint(err); !strings.Contains(msg, "line 1: ") || !strings.Contains(msg, "line 2: ") || strings.Contains(msg, "more") {
		t.Errorf("two problems: error %q, want both lines and no count", msg)
	}
}

func TestOverlappingRangesAreNamedWithBothLines(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"last uid shared", "alice:100000:10\nbob:100009:10\n", "line 2: the range 100009-100018 of bob overlaps the range 100000-100009 of alice on line 1"},
		{"later line first", "bob:100009:10\nalice:100000:10\n", "line 2: the range 100000-100009 of alice overlaps the range 100009-100018 of bob on line 1"},
		{"same start", "alice:5:1\nalice:5:1\n", "line 2: the range 5-5 of alice overlaps the range 5-5 of alice on line 1"},
		{"inside a long range, after a short one", "alice:100:1000\nbob:200:1\nbob:500:1\n", "line 3: the range 500-500 of bob overlaps the range 100-1099 of alice on line 1"},
		{"an unresolved one too", "nobody-here:100:10\nalice:105:1\n", "line 2: the range 105-105 of alice overlaps the range 100-109 of nobody-here on line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := subid.Parse(strings.NewReader(c.text), resolve)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, c.want)
			}
			if !errors.Is(err, subid.ErrOverlap) {
				t.Errorf("Parse error %v is not ErrOverlap", err)
			}
		})
	}
	// Touching is not overlapping.
	m := parse(t, "alice:100000:10\nbob:100010:10\n")
	if owner, _ := m.Owner(100010); owner != 1001 {
		t.Errorf("Owner(100010) = %d, want 1001", owner)
	}
}

func TestTheSecondOfThreeOverlapsIsFound(t *testing.T) {
	// alice's range reaches furthest; bob's first range is inside it, and
	// so is bob's second: both are reported, against alice's.
	_, err := subid.Parse(strings.NewReader("alice:100:1000\nbob:200:1\nbob:500:1\n"), resolve)
	msg := fmt.Sprint(err)
	for _, want := range []string{"line 2: the range 200-200 of bob", "line 3: the range 500-500 of bob"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestOfTwoRangesEndingTogetherTheNearerIsNamed(t *testing.T) {
	// alice's and bob's ranges end at the same uid, 109; carol's is inside
	// both and is named against bob's, the one starting nearer to it.
	_, err := subid.Parse(strings.NewReader("alice:100:10\nbob:105:5\ncarol:107:1\n"), resolve)
	msg := fmt.Sprint(err)
	for _, want := range []string{
		"line 2: the range 105-109 of bob overlaps the range 100-109 of alice on line 1",
		"line 3: the range 107-107 of carol overlaps the range 105-109 of bob on line 2",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestUnknownNamesAreKeptApartAndOwnNothing(t *testing.T) {
	m := parse(t, "alice:100000:10\nghost:200000:10\n")
	if _, ok := m.Owner(200000); ok {
		t.Error("a range of an unknown account has an owner")
	}
	un := m.Unresolved()
	if len(un) != 1 || un[0].Name != "ghost" || un[0].Line != 2 || un[0].First != 200000 || un[0].Last != 200009 || un[0].Resolved {
		t.Errorf("Unresolved = %+v, want ghost's range on line 2", un)
	}
	if rs := m.Ranges(); len(rs) != 1 || rs[0].Name != "alice" || !rs[0].Resolved || rs[0].Owner != 1000 {
		t.Errorf("Ranges = %+v, want alice's alone", rs)
	}
}

func TestAFailedLookupIsAnError(t *testing.T) {
	broken := errors.New("nss unreachable")
	_, err := subid.Parse(strings.NewReader("# c\nalice:100000:10\n"), func(string) (uint32, bool, error) { return 0, false, broken })
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), `line 2: resolving the owner "alice"`) {
		t.Errorf("Parse error = %v, want the lookup's, on line 2", err)
	}
}

func TestAReadErrorIsReturned(t *testing.T) {
	broken := errors.New("disk gone")
	_, err := subid.Parse(iotest.ErrReader(broken), resolve)
	if !errors.Is(err, broken) {
		t.Errorf("Parse error = %v, want the read's", err)
	}
}

func TestRangesAreSortedAndCopied(t *testing.T) {
	m := parse(t, "bob:300:1\nalice:100:1\n1005:200:1\n")
	rs := m.Ranges()
	if len(rs) != 3 || rs[0].First != 100 || rs[1].First != 200 || rs[2].First != 300 || rs[1].Line != 3 {
		t.Fatalf("Ranges = %+v, want sorted by First with their lines", rs)
	}
	rs[0].Owner = 7
	if owner, _ := m.Owner(100); owner != 1000 {
		t.Error("changing Ranges' result changed the Map")
	}
	if !rs[1].Contains(200) || rs[1].Contains(201) || rs[1].Contains(199) {
		t.Errorf("Contains of %+v is wrong at its bounds", rs[1])
	}
}

func TestExemptUidsAreNeverMappedNorMappedTo(t *testing.T) {
	m := parse(t, "alice:100000:10\nroot:200000:10\n1005:300000:10\nbob:0:1\nghost:500:1\n")
	ex, left := m.Exempt(0, 1005, 500, 100009)
	for _, c := range []struct {
		uid   uint32
		owner uint32
		ok    bool
	}{
		{100000, 1000, true}, // alice's, untouched
		{100008, 1000, true},
		{100009, 0, false}, // exempt inside alice's range, at its last uid
		{200000, 0, false}, // root's range is left out: its uids stay themselves
		{200009, 0, false},
		{300000, 0, false}, // the daemon's (1005) too
		{0, 0, false},      // root inside bob's range stays root
	} {
		owner, ok := ex.Owner(c.uid)
		if owner != c.owner || ok != c.ok {
			t.Errorf("Exempt(…).Owner(%d) = %d, %v; want %d, %v", c.uid, owner, ok, c.owner, c.ok)
		}
	}
	if owner, ok := m.Owner(200000); !ok || owner != 0 {
		t.Errorf("Exempt changed m: Owner(200000) = %d, %v; want 0, true", owner, ok)
	}
	want := []subid.Exemption{
		{Range: subid.Range{Name: "alice", Owner: 1000, Resolved: true, First: 100000, Last: 100009, Line: 1}, UID: 100009},
		{Range: subid.Range{Name: "root", Owner: 0, Resolved: true, First: 200000, Last: 200009, Line: 2}, UID: 0, Owned: true},
		{Range: subid.Range{Name: "1005", Owner: 1005, Resolved: true, First: 300000, Last: 300009, Line: 3}, UID: 1005, Owned: true},
		{Range: subid.Range{Name: "bob", Owner: 1001, Resolved: true, First: 0, Last: 0, Line: 4}, UID: 0},
		{Range: subid.Range{Name: "ghost", First: 500, Last: 500, Line: 5}, UID: 500},
	}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("Exempt left out\n%+v\nwant\n%+v", left, want)
	}
	if ex.Len() != 2 || len(ex.Unresolved()) != 1 {
		t.Errorf("Exempt map has %d ranges and %d unresolved, want 2 and 1", ex.Len(), len(ex.Unresolved()))
	}
	again, more := ex.Exempt(1000)
	if _, ok := again.Owner(100009); ok {
		t.Error("a second Exempt forgot the first's uids")
	}
	if _, ok := again.Owner(100000); ok || len(more) != 1 {
		t.Errorf("a second Exempt kept alice's range (%d left out)", len(more))
	}
	if n, l := (*subid.Map)(nil).Exempt(0); n != nil || l != nil {
		t.Error("Exempt of a nil Map is not nil")
	}
	if _, l := parse(t, "alice:100000:10\n").Exempt(0, 99999, 100010); l != nil {
		t.Errorf("Exempt of uids outside every range left out %+v", l)
	}
}

func TestLoadReadsAFileAndNamesItInErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "subuid")
	if err := os.WriteFile(good, []byte("root:100000:10\n0:200000:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := subid.Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if owner, ok := m.Owner(100009); !ok || owner != 0 {
		t.Errorf("Owner(100009) = %d, %v; want root's 0, true (os/user resolves root)", owner, ok)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("root:100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := subid.Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": line 1: ") || !errors.Is(err, subid.ErrMalformed) {
		t.Errorf("Load(bad) = %v, want %s: line 1: …", err, bad)
	}
	if _, err := subid.Load(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadRefusesAFileBeyondTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("#", 1000) + "\n")
	for n := 0; n <= subid.MaxFileBytes; n += len(line) {
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := subid.Load(path); !errors.Is(err, subid.ErrTooLarge) {
		t.Errorf("Load(huge) = %v, want ErrTooLarge", err)
	}
	// One long line, no newline: the bound holds inside a line too.
	if _, err := subid.Parse(strings.NewReader(strings.Repeat("a", subid.MaxFileBytes+1)), resolve); !errors.Is(err, subid.ErrTooLarge) {
		t.Errorf("Parse(one huge line) = %v, want ErrTooLarge", err)
	}
	// Exactly the bound is read.
	exact := strings.Repeat("#", subid.MaxFileBytes-1) + "\n"
	if _, err := subid.Parse(strings.NewReader(exact), resolve); err == nil || errors.Is(err, subid.ErrTooLarge) {
		t.Errorf("Parse(exactly MaxFileBytes) = %v, want the long line refused, not the size", err)
	}
}

func TestLookupUserResolvesTheHostsAccounts(t *testing.T) {
	if uid, ok, err := subid.LookupUser("root"); err != nil || !ok || uid != 0 {
		t.Errorf("LookupUser(root) = %d, %v, %v; want 0, true, nil", uid, ok, err)
	}
	if _, ok, err := subid.LookupUser("no-such-account-registrar-test"); err != nil || ok {
		t.Errorf("LookupUser(unknown) = %v, %v; want false, nil", ok, err)
	}
}
