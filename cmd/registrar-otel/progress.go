package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
)

// progressPrinter shows a load run's progress on stderr: on a terminal one
// live line redrawn in place, ending at the run's final counts; otherwise
// a plain line at most every interval (and one with the final counts), so
// a pipe or a log file gets regular, complete lines. It is safe for
// concurrent use.
type progressPrinter struct {
	w        io.Writer
	mode     progressMode
	interval time.Duration

	mu      sync.Mutex
	last    loadgen.Progress
	have    bool
	printed time.Duration // Elapsed of the last plain line
	drawn   bool          // a live line is on screen
}

func newProgressPrinter(w io.Writer, mode progressMode, interval time.Duration) *progressPrinter {
	return &progressPrinter{w: w, mode: mode, interval: interval}
}

func progressLine(p loadgen.Progress) string {
	s := fmt.Sprintf("%6.1fs  %d/%d done  admitted %d  throttled %d  refused %d  failed %d",
		p.Elapsed.Seconds(), p.Done, p.Target, p.Admitted, p.Throttled, p.Refused, p.Failed)
	if p.Abandoned > 0 {
		s += fmt.Sprintf("  abandoned %d", p.Abandoned)
	}
	return s
}

// update is loadgen's OnProgress.
func (pp *progressPrinter) update(p loadgen.Progress) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.last, pp.have = p, true
	switch pp.mode {
	case progressLive:
		fmt.Fprintf(pp.w, "\r\033[K%s", progressLine(p))
		pp.drawn = true
	case progressPlain:
		if p.Elapsed-pp.printed >= pp.interval {
			fmt.Fprintf(pp.w, "progress: %s\n", progressLine(p))
			pp.printed = p.Elapsed
		}
	}
}

// finish ends the display after the run; loadgen's last update carried the
// final counts, which finish makes sure are shown.
func (pp *progressPrinter) finish() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if !pp.have {
		return
	}
	switch pp.mode {
	case progressLive:
		fmt.Fprintf(pp.w, "\r\033[K%s\n", progressLine(pp.last))
	case progressPlain:
		if pp.printed != pp.last.Elapsed {
			fmt.Fprintf(pp.w, "progress: %s\n", progressLine(pp.last))
		}
	}
}

// note prints a line of its own between progress updates: on a terminal it
// replaces the live line, which the next update draws again below it.
func (pp *progressPrinter) note(line string) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.mode == progressLive && pp.drawn {
		fmt.Fprint(pp.w, "\r\033[K")
	}
	fmt.Fprintln(pp.w, line)
}

// liveEvery is how often the live terminal line is redrawn.
const liveEvery = 200 * time.Millisecond

// progressMode is how progress is shown, decided once per run.
type progressMode int

const (
	progressOff progressMode = iota
	progressPlain
	progressLive
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
