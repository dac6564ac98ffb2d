package journalprio

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestPriorityOfEachLevel(t *testing.T) {
	for l, want := range map[slog.Level]int{
		slog.LevelError + 4: 3, slog.LevelError: 3, slog.LevelError - 1: 4,
		slog.LevelWarn: 4, slog.LevelWarn - 1: 6, slog.LevelInfo: 6,
		slog.LevelInfo - 1: 7, slog.LevelDebug: 7,
	} {
		if got := Priority(l); got != want {
			t.Errorf("Priority(%v) = %d, want %d", l, got, want)
		}
	}
}

// Every line carries its own record's priority, through WithAttrs and
// WithGroup and from concurrent loggers: the prefix is never another
// record's.
func TestEachLineCarriesItsLevelsPriority(t *testing.T) {
	var out strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	base := slog.New(Handler(w, func(w io.Writer) slog.Handler {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	}))
	loggers := []*slog.Logger{base, base.With("component", "wire"), base.WithGroup("g")}
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				l := levels[(i+j)%len(levels)]
				loggers[j%len(loggers)].Log(t.Context(), l, "m", "level_was", l.String())
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		for _, l := range levels {
			if strings.Contains(line, `"level_was":"`+l.String()+`"`) {
				if want := fmt.Sprintf("<%d>{", Priority(l)); !strings.HasPrefix(line, want) {
					t.Fatalf("line %q, want it to start %q", line, want)
				}
			}
		}
	}
}

func TestToJournalOnlyForTheStreamNamed(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	named := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if !ToJournal(named, f) {
		t.Errorf("ToJournal(%q) of the file it names = false", named)
	}
	for _, js := range []string{"", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), fmt.Sprintf("%d:%d", st.Dev+1, st.Ino), named + "0", "x"} {
		if ToJournal(js, f) {
			t.Errorf("ToJournal(%q) of another file = true", js)
		}
	}
	if ToJournal(named, nil) {
		t.Error("ToJournal of no file = true")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestPrefixedStartsEveryLine(t *testing.T) {
	var out strings.Builder
	w := Prefixed(&out, 3)
	for _, s := range []string{"a\nb", "c\n", "", "d\n\ne\n"} {
		if n, err := io.WriteString(w, s); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := out.String(), "<3>a\n<3>bc\n<3>d\n<3>\n<3>e\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var hi strings.Builder
	io.WriteString(Prefixed(&hi, 99), "x\n")
	if hi.String() != "<7>x\n" {
		t.Errorf("priority 99: %q, want it clamped to <7>", hi.String())
	}
}

// The handler's writer reports a line written whole as all of it, and a
// failed write as the error, which reaches Handle's caller.
func TestTheWritersResultReachesTheInnerHandler(t *testing.T) {
	var pw io.Writer
	h := Handler(io.Discard, func(w io.Writer) slog.Handler { pw = w; return slog.NewTextHandler(w, nil) })
	if n, err := pw.Write([]byte("line\n")); n != 5 || err != nil {
		t.Errorf("Write of a 5-byte line = %d, %v, want 5, nil", n, err)
	}
	if err := h.Handle(t.Context(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)); err != nil {
		t.Errorf("Handle to io.Discard: %v", err)
	}

	failed := errors.New("disk full")
	h = Handler(writerFunc(func([]byte) (int, error) { return 0, failed }), func(w io.Writer) slog.Handler { pw = w; return slog.NewTextHandler(w, nil) })
	if n, err := pw.Write([]byte("line\n")); n != 0 || !errors.Is(err, failed) {
		t.Errorf("Write to a failing writer = %d, %v, want 0, %v", n, err, failed)
	}
	if err := h.Handle(t.Context(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)); !errors.Is(err, failed) {
		t.Errorf("Handle to a failing writer = %v, want %v", err, failed)
	}
}
