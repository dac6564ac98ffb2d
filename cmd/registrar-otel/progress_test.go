package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
)

func prog(elapsed time.Duration, done uint64) loadgen.Progress {
	return loadgen.Progress{Target: 5000, Done: done, Admitted: done, Elapsed: elapsed}
}

// On a terminal the live line is redrawn in place and the last one drawn
// is the run's final count, ended by a newline.
func TestLiveProgressEndsAtTheFinalCount(t *testing.T) {
	var w bytes.Buffer
	pp := newProgressPrinter(&w, progressLive, 5*time.Second)
	pp.update(prog(200*time.Millisecond, 1000))
	pp.update(prog(400*time.Millisecond, 4815))
	pp.update(prog(500*time.Millisecond, 5000)) // loadgen's final call
	pp.finish()
	out := w.String()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("live output %q: want one line redrawn with \\r, ended once", out)
	}
	draws := strings.Split(strings.TrimSuffix(out, "\n"), "\r\033[K")
	if last := draws[len(draws)-1]; !strings.Contains(last, "5000/5000 done") {
		t.Fatalf("last live line %q, want the final 5000/5000", last)
	}
}

// Off a terminal a plain line is printed at most every interval, and the
// final counts always end the output.
func TestPlainProgressLinesEveryInterval(t *testing.T) {
	var w bytes.Buffer
	pp := newProgressPrinter(&w, progressPlain, time.Second)
	for ms := 200; ms <= 3000; ms += 200 {
		pp.update(prog(time.Duration(ms)*time.Millisecond, uint64(ms)))
	}
	pp.update(prog(3100*time.Millisecond, 5000))
	pp.finish()
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 3 at 1 s, 2 s, 3 s and the final one:\n%s", len(lines), w.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "progress: ") || strings.Contains(l, "\r") {
			t.Errorf("line %q: want a plain progress line", l)
		}
	}
	if !strings.Contains(lines[3], "5000/5000 done") {
		t.Errorf("last line %q, want the final count", lines[3])
	}
	var off bytes.Buffer
	pp = newProgressPrinter(&off, progressOff, time.Second)
	pp.update(prog(2*time.Second, 1))
	pp.finish()
	if off.Len() != 0 {
		t.Errorf("--progress off printed %q", off.String())
	}
}
