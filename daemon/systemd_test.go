package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/wire"
)

// notes records the sd_notify states a daemon sends, in order.
type notes struct {
	mu     sync.Mutex
	states []string
	ch     chan string
}

func newNotes() *notes { return &notes{ch: make(chan string, 1024)} }

func (n *notes) add(s string) {
	n.mu.Lock()
	n.states = append(n.states, s)
	n.mu.Unlock()
	select {
	case n.ch <- s:
	default: // a flood of states: the count still has them all
	}
}

func (n *notes) count(s string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.states {
		if x == s {
			c++
		}
	}
	return c
}

// next waits for the next state that starts with prefix (bounded).
func (n *notes) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-n.ch:
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case <-timeout:
			t.Fatalf("no %s within 30 s; states %v", prefix, n.states)
		}
	}
}

func TestReadyIsSentOnlyOnceTheSocketAnswers(t *testing.T) {
	cfg := testConfig(t)
	n := newNotes()
	answered := make(chan error, 1)
	r, _ := startLogged(t, cfg, seams{
		notify: func(s string) error {
			if s == "READY=1" {
				// Synchronously, before the daemon goes on: the socket
				// must answer now.
				c := wire.NewUnixClient(cfg.Registrar.SocketPath, wire.WithTimeout(10*time.Second))
				resp, err := c.Health(context.Background())
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("health answered HTTP %d", resp.StatusCode)
				}
				answered <- err
			}
			n.add(s)
			return nil
		},
	})
	n.next(t, "READY=1")
	if err := <-answered; err != nil {
		t.Fatalf("at READY=1 the socket did not answer: %v", err)
	}
	if st := n.next(t, "STATUS="); !strings.Contains(st, "serving") || !strings.Contains(st, "audit store ok") {
		t.Errorf("status after READY: %q, want serving and the audit store's state", st)
	}
	r.stop(t)
	if got := n.count("READY=1"); got != 1 {
		t.Errorf("READY=1 sent %d times, want once", got)
	}
}

func TestTheWatchdogIsFedByTheTickAndStopsWhileTheTickStalls(t *testing.T) {
	cfg := testConfig(t)
	n := newNotes()
	ticks := make(chan time.Time)
	var stall atomic.Bool
	stalled, release := make(chan struct{}), make(chan struct{})
	var passes atomic.Int64
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	r, _ := startLogged(t, cfg, seams{
		notify: func(s string) error { n.add(s); return nil },
		// A watchdog far shorter than any test step: a ping from a timer
		// of its own would show up between the tick's pings.
		watchdog: time.Millisecond,
		ticks:    ticks,
		now:      func() time.Time { return time.Unix(0, now.Load()) },
		beforeTick: func() {
			if stall.Load() {
				stalled <- struct{}{}
				<-release
			}
			passes.Add(1)
		},
	})
	var releaseOnce sync.Once
	unstall := func() { releaseOnce.Do(func() { stall.Store(false); close(release) }) }
	t.Cleanup(unstall) // runs before the daemon's cleanup: a failed test must not leave the tick hung
	n.next(t, "READY=1")
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		r.d.tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	if c := probe("/readyz"); c != http.StatusOK {
		t.Fatalf("/readyz after READY: %d, want 200", c)
	}
	for i := range 3 {
		ticks <- time.Now()
		n.next(t, "WATCHDOG=1")
		if got := n.count("WATCHDOG=1"); got != i+1 {
			t.Fatalf("after %d passes, %d WATCHDOG=1, want one per pass", i+1, got)
		}
	}

	// Stall the tick: the pass starts and hangs.
	stall.Store(true)
	ticks <- time.Now()
	<-stalled
	// The liveness probe sees the tick late once the bound has passed.
	bound := TickLateBound(time.Duration(cfg.Registrar.MaintenanceIntervalMS) * time.Millisecond)
	now.Add(int64(bound + time.Second))
	if c := probe("/healthz"); c != http.StatusServiceUnavailable {
		t.Errorf("/healthz with the tick stalled past the bound: %d, want 503", c)
	}
	if c := probe("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the tick stalled past the bound: %d, want 503", c)
	}
	// Wire calls still work while stalled (and take real time); no ping
	// may come from anywhere but a finished pass.
	for range 200 {
		if resp, err := r.client.Health(context.Background()); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("health while the tick stalls: %+v, %v", resp, err)
		}
	}
	if got := n.count("WATCHDOG=1"); got != 3 {
		t.Fatalf("%d WATCHDOG=1 while the tick stalled, want still the 3 of the finished passes", got)
	}
	unstall()
	n.next(t, "WATCHDOG=1")
	if got, p := n.count("WATCHDOG=1"), passes.Load(); int64(got) != p {
		t.Fatalf("%d WATCHDOG=1 after %d passes, want one per pass", got, p)
	}
	if c := probe("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz after the stalled pass finished: %d, want 200", c)
	}
	r.stop(t)
}

func TestStoppingIsSentBeforeTheWindowsAreFlushed(t *testing.T) {
	cfg := testConfig(t)
	n := newNotes()
	var atStopping, atFlushing int = -1, -1
	var dd *Daemon // set before Run, the first to notify
	r, _ := startLogged(t, cfg, seams{
		notify: func(s string) error {
			switch {
			case s == "STOPPING=1":
				atStopping = int(scanDir(t, cfg.Registrar.AuditRecordDir).Limited[0].Count)
				if c := probeCode(dd, "/readyz"); c != http.StatusServiceUnavailable {
					t.Errorf("/readyz at STOPPING=1: %d, want 503", c)
				}
			case strings.HasPrefix(s, "STATUS=stopping: flushing"):
				atFlushing = int(scanDir(t, cfg.Registrar.AuditRecordDir).Limited[0].Count)
				if !strings.Contains(s, "flushing 1 coalescing windows") {
					t.Errorf("status %q, want the one open window", s)
				}
			}
			n.add(s)
			return nil
		},
	})
	dd = r.d
	n.next(t, "READY=1")
	for range 5 {
		r.client.Mint(context.Background(), mint("BAD")) // 2 recorded, 3 limited: one open window
	}
	r.stop(t)
	if atStopping != 0 || atFlushing != 0 {
		t.Fatalf("limited count on record at STOPPING=1: %d, at the flushing status: %d; want 0 (not yet flushed)", atStopping, atFlushing)
	}
	if got := scanDir(t, cfg.Registrar.AuditRecordDir).Limited[0].Count; got != 3 {
		t.Fatalf("limited count after the flush: %d, want 3", got)
	}
	if i, j := index(n.states, "STOPPING=1"), index(n.states, "READY=1"); i < 0 || i < j {
		t.Fatalf("states %v: want STOPPING=1 after READY=1", n.states)
	}
}

func probeCode(d *Daemon, path string) int {
	rec := httptest.NewRecorder()
	d.tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code
}

func index(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// The tick is late past three intervals, and never before 5 s.
func TestTickLateBoundIsThreeIntervalsAndAtLeastFiveSeconds(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{
		time.Second:      5 * time.Second,
		2 * time.Second:  6 * time.Second,
		10 * time.Second: 30 * time.Second,
	} {
		if got := TickLateBound(interval); got != want {
			t.Errorf("TickLateBound(%v) = %v, want %v", interval, got, want)
		}
	}
}

// A failed sd_notify is logged once, at WARN, with its state; one that
// succeeds says nothing.
func TestAFailedNotifyIsLoggedAndOnlyThat(t *testing.T) {
	var logs strings.Builder
	fail := errors.New("connection refused")
	var err error
	d := &Daemon{
		logger: slog.New(slog.NewTextHandler(&logs, nil)),
		seams:  seams{notify: func(string) error { return err }},
	}
	d.notify("READY=1")
	if logs.Len() != 0 {
		t.Errorf("a notify that succeeded logged %q", logs.String())
	}
	err = fail
	d.notify("STOPPING=1")
	if got := logs.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "level=WARN") ||
		!strings.Contains(got, `msg="sd_notify failed" state="STOPPING=1" error="connection refused"`) {
		t.Errorf("a failed notify logged %q, want one WARN line with its state and error", got)
	}
}

// The tick is late only past its bound, not at it.
func TestTheTickIsLateOnlyPastItsBound(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newTickClock(time.Second, func() time.Time { return now })
	c.passed(now)
	now = now.Add(TickLateBound(time.Second))
	if err := c.late(); err != nil {
		t.Errorf("at the bound: %v, want not late", err)
	}
	now = now.Add(time.Nanosecond)
	if err := c.late(); err == nil || !strings.Contains(err.Error(), "the maintenance tick is late") {
		t.Errorf("a nanosecond past the bound: %v, want late", err)
	}
}

// After each pass the watchdog is fed only when it is on, and STATUS= is
// sent only when it changed.
func TestAfterAPassTheWatchdogIsFedOnlyWhenOn(t *testing.T) {
	for _, watchdog := range []time.Duration{0, 10 * time.Second} {
		n := newNotes()
		now := time.Unix(1_800_000_000, 0)
		d := &Daemon{
			logger:   slog.New(slog.DiscardHandler),
			capacity: &audit.CapacityProbe{},
			watchdog: watchdog,
			ticks:    newTickClock(time.Second, func() time.Time { return now }),
			seams:    seams{now: func() time.Time { return now }, notify: func(s string) error { n.add(s); return nil }},
		}
		d.afterPass(now)
		d.afterPass(now)
		want := 0
		if watchdog > 0 {
			want = 2
		}
		if got := n.count("WATCHDOG=1"); got != want {
			t.Errorf("watchdog %v: WATCHDOG=1 sent %d times in two passes, want %d", watchdog, got, want)
		}
		if got := n.count("STATUS=" + d.status()); got != 1 {
			t.Errorf("watchdog %v: STATUS= sent %d times in two passes, want once (states %v)", watchdog, got, n.states)
		}
	}
}

// Without LISTEN_FDS the daemon was not socket activated, whatever
// LISTEN_PID says; with LISTEN_FDS for another process, neither.
func TestActivationNeedsListenFDsForThisProcess(t *testing.T) {
	for _, env := range [][2]string{
		{"", strconv.Itoa(os.Getpid())},
		{"1", strconv.Itoa(os.Getpid() + 1)},
	} {
		t.Setenv("LISTEN_FDS", env[0])
		t.Setenv("LISTEN_PID", env[1])
		if l, err := activatedUnix("/run/registrar-otel/registrar.sock"); l != nil || err != nil {
			t.Errorf("LISTEN_FDS=%q LISTEN_PID=%s: activatedUnix = %v, %v, want not activated", env[0], env[1], l, err)
		}
		if n := CloseActivated(); n != 0 {
			t.Errorf("LISTEN_FDS=%q LISTEN_PID=%s: CloseActivated = %d, want 0", env[0], env[1], n)
		}
	}
}
