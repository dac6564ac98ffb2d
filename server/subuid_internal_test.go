package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/subid"
)

// subuidServer is a server whose administrative policy admits uids 0 and
// 7 (the operators), logging at debug into the returned buffer.
func subuidServer(t *testing.T, ranges string) (*Server, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	s, err := New(Options{
		Verbs: stubVerbs{}, Health: newTestHolder(t),
		AdminAllowed: func(uid uint32) bool { return uid == 0 || uid == 7 },
		Logger:       slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ranges != "" {
		m, err := subid.Parse(strings.NewReader(ranges), func(string) (uint32, bool, error) { return 0, false, nil })
		if err != nil {
			t.Fatal(err)
		}
		s.SetSubordinateUIDs(m)
	}
	return s, &log
}

func TestAUidInASubordinateRangeIsItsOwner(t *testing.T) {
	s, log := subuidServer(t, "1000:100000:10\n1001:100010:1\n7:200000:10\n1002:0:1\n1003:5:5\n")
	for _, c := range []struct {
		uid  uint32
		want string
		sub  bool
	}{
		{99999, "unix-peer:uid=99999", false},
		{100000, "unix-peer:uid=1000", true},
		{100009, "unix-peer:uid=1000", true},
		{100010, "unix-peer:uid=1001", true},
		{100011, "unix-peer:uid=100011", false},
		{1000, "unix-peer:uid=1000", false},
		// An operator never comes out of a range...
		{200000, "unix-peer:uid=200000", false},
		{200009, "unix-peer:uid=200009", false},
		// ... nor goes into one.
		{0, "unix-peer:uid=0", false},
		{7, "unix-peer:uid=7", false},
		{8, "unix-peer:uid=1003", true}, // beside the operator 7, in the same range
	} {
		got := s.unixIdentity(c.uid)
		if got.id != c.want || got.subordinate != c.sub || got.problem != "" {
			t.Errorf("uid %d: identity %q (subordinate %v, problem %q), want %q (subordinate %v)", c.uid, got.id, got.subordinate, got.problem, c.want, c.sub)
		}
		if c.sub && got.peerUID != c.uid {
			t.Errorf("uid %d: peer uid kept as %d", c.uid, got.peerUID)
		}
		if !c.sub && got.peerUID != 0 {
			t.Errorf("uid %d: a uid that is its own identity keeps a peer uid %d", c.uid, got.peerUID)
		}
	}
	if want := `msg="unix peer identified as the owner of its subordinate uid range" identity="unix-peer:uid=1000" peer_uid=100009`; !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %s", log, want)
	}
	if n := strings.Count(log.String(), "subordinate uid range"); n != 4 {
		t.Errorf("%d debug lines for the 4 mapped uids:\n%s", n, log)
	}
}

func TestWithoutRangesEveryUidIsItself(t *testing.T) {
	s, log := subuidServer(t, "")
	if got := s.unixIdentity(100000); got.id != "unix-peer:uid=100000" || got.subordinate {
		t.Errorf("no ranges: %+v, want unix-peer:uid=100000", got)
	}
	s2, _ := subuidServer(t, "1000:100000:10\n")
	s2.SetSubordinateUIDs(nil)
	if got := s2.unixIdentity(100000); got.id != "unix-peer:uid=100000" {
		t.Errorf("ranges taken away: %+v, want unix-peer:uid=100000", got)
	}
	if log.Len() != 0 {
		t.Errorf("a uid that is itself logged:\n%s", log)
	}
}
