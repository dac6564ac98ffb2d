// Package journalprio gives each log line the syslog priority of its
// level when stderr is systemd's journal: journald reads a line that
// starts with "<N>" as priority N (sd-daemon(3), SyslogLevelPrefix=, on
// by default) and strips the prefix, so `journalctl -p err` selects the
// daemon's ERROR lines. Without it every line is priority 6 (info).
package journalprio

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Priority is the syslog priority of a slog level: ERROR and above 3
// (err), WARN 4 (warning), INFO 6 (info), below 7 (debug).
func Priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// ToJournal reports whether f is the stream systemd connected to the
// journal: JOURNAL_STREAM (systemd.exec(5)) holds "DEVICE:INODE" of that
// stream, and it still names f (a redirection in between would not).
func ToJournal(journalStream string, f *os.File) bool {
	if journalStream == "" || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return journalStream == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// Handler makes a handler writing to w with newInner, each record's line
// prefixed with "<N>", N its level's Priority. newInner must write each
// record with one call of its writer's Write, as slog's text and JSON
// handlers do.
func Handler(w io.Writer, newInner func(io.Writer) slog.Handler) slog.Handler {
	pw := &prefixWriter{w: w}
	return &handler{inner: newInner(pw), pw: pw}
}

// prefixWriter writes the current record's prefix before its line; mu,
// held by handler.Handle around the inner handler's one Write, keeps the
// prefix and the line together.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	// One Write: journald reads a line as it arrives, and a prefix
	// written alone could be joined to another writer's line.
	var sb strings.Builder
	sb.Grow(len(p.prefix) + len(b))
	sb.WriteString(p.prefix)
	sb.Write(b)
	if _, err := io.WriteString(p.w, sb.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}

type handler struct {
	inner slog.Handler
	pw    *prefixWriter
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	h.pw.mu.Lock()
	defer h.pw.mu.Unlock()
	h.pw.prefix = prefixes[Priority(r.Level)]
	return h.inner.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{inner: h.inner.WithAttrs(as), pw: h.pw}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), pw: h.pw}
}

var prefixes = [8]string{"<0>", "<1>", "<2>", "<3>", "<4>", "<5>", "<6>", "<7>"}

// Prefixed returns a writer that starts every line written to w with
// priority's "<N>", for text written without a logger (a list of
// configuration errors). Lines may span Writes; each Write is passed on
// as one Write.
func Prefixed(w io.Writer, priority int) io.Writer {
	return &linePrefixer{w: w, prefix: prefixes[min(max(priority, 0), 7)], atStart: true}
}

type linePrefixer struct {
	w       io.Writer
	prefix  string
	atStart bool
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	var sb strings.Builder
	sb.Grow(len(b) + 4*len(p.prefix))
	for _, c := range b {
		if p.atStart {
			sb.WriteString(p.prefix)
			p.atStart = false
		}
		sb.WriteByte(c)
		if c == '\n' {
			p.atStart = true
		}
	}
	if _, err := io.WriteString(p.w, sb.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}
