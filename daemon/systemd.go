package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/registrar-otel/registrar-otel/config"
)

// The service manager protocol (sd_notify(3)), spoken only when systemd
// (or anything playing it) set NOTIFY_SOCKET:
//
//   - READY=1 once New has bound every listener (or taken the unix one
//     from socket activation), opened the audit store and built the
//     backend, and Run has started serving them: a caller ordered After=
//     the unit finds the socket answering;
//   - STATUS= lines for `systemctl status`: serving (with the audit store's
//     capacity state, refreshed when it changes), stopping, flushing N
//     windows;
//   - WATCHDOG=1 from the maintenance tick, after each pass (never from a
//     timer of its own), when WATCHDOG_USEC is set: a tick that stalls
//     stops the pings and systemd restarts the daemon after WatchdogSec;
//   - STOPPING=1 when shutdown begins, before the listeners close and the
//     windows are flushed.

// notifyFunc sends one sd_notify state (e.g. "READY=1"). Errors are
// logged by the caller's wrapper, never fatal: the daemon serves the same
// whether or not anything listens.
type notifyFunc func(state string) error

// systemdNotify is the real notifier: go-systemd's SdNotify, which does
// nothing when NOTIFY_SOCKET is unset.
func systemdNotify(state string) error {
	_, err := sddaemon.SdNotify(false, state)
	return err
}

// notify sends state, logging a failure once per call at WARN.
func (d *Daemon) notify(state string) {
	if err := d.seams.notify(state); err != nil {
		d.logger.LogAttrs(context.Background(), slog.LevelWarn, "sd_notify failed", slog.String("state", state), slog.Any("error", err))
	}
}

// watchdogInterval is WATCHDOG_USEC (for this process, per WATCHDOG_PID),
// 0 when the watchdog is off.
func watchdogInterval() (time.Duration, error) {
	return sddaemon.SdWatchdogEnabled(false)
}

// TickLateBound is how late the maintenance tick may be before /healthz
// (liveness) and /readyz answer 503: three intervals after the last
// completed pass, and never less than 5 s (a pass that waits on one slow
// fsync is not a stall).
func TickLateBound(interval time.Duration) time.Duration {
	return max(3*interval, 5*time.Second)
}

// tickClock records when the last maintenance pass finished, for the
// liveness answer. Safe for concurrent use.
type tickClock struct {
	last  atomic.Int64 // unix nanoseconds of the last completed pass
	bound time.Duration
	now   func() time.Time
}

func newTickClock(interval time.Duration, now func() time.Time) *tickClock {
	c := &tickClock{bound: TickLateBound(interval), now: now}
	c.last.Store(now().UnixNano())
	return c
}

func (c *tickClock) passed(t time.Time) { c.last.Store(t.UnixNano()) }

// late returns nil while the last pass is within the bound, else an error
// saying by how much the tick is late.
func (c *tickClock) late() error {
	since := c.now().Sub(time.Unix(0, c.last.Load()))
	if since > c.bound {
		return fmt.Errorf("the maintenance tick is late: last pass %s ago (bound %s)", since.Round(time.Millisecond), c.bound)
	}
	return nil
}

// activatedUnix returns the unix listener systemd handed over for path
// (LISTEN_FDS, LISTEN_PID), or nil when the daemon was not socket
// activated. The other handed-over descriptors are closed. A handed-over
// set without a stream socket bound at path is a configuration error
// naming registrar.socket_path: a socket unit pointing elsewhere would
// otherwise leave callers of the configured path refused.
func activatedUnix(path string) (net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "" {
		return nil, nil
	}
	if pid, err := strconv.Atoi(os.Getenv("LISTEN_PID")); err != nil || pid != os.Getpid() {
		return nil, nil // meant for another process (activation's own rule)
	}
	ls, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("daemon: socket activation (LISTEN_FDS): %w", err)
	}
	want := filepath.Clean(path)
	var found net.Listener
	var seen []string
	var others []net.Listener
	for _, l := range ls {
		if l == nil {
			continue
		}
		if ul, ok := l.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false) // the socket unit owns the file
			if found == nil && filepath.Clean(ul.Addr().String()) == want {
				found = l
				continue
			}
		}
		seen = append(seen, l.Addr().Network()+":"+l.Addr().String())
		others = append(others, l)
	}
	for _, l := range others {
		if found == nil {
			closeWaiting(l) // the start fails: see closeWaiting
		}
		l.Close()
	}
	if found == nil {
		return nil, &SetupError{Err: fmt.Errorf("daemon: socket activation: %w", &config.KeyError{
			Key: "registrar.socket_path", Value: path,
			Rule: fmt.Sprintf("is not among the sockets systemd handed over (%v); make ListenStream= of the socket unit the same path", seen),
		})}
	}
	return found, nil
}

// afterPass follows each maintenance pass: it records the pass for
// /healthz, feeds the watchdog, and updates STATUS= when the audit store's
// state changed. A stalled pass reaches none of these.
func (d *Daemon) afterPass(time.Time) {
	d.ticks.passed(d.seams.now())
	if d.watchdog > 0 {
		d.notify("WATCHDOG=1")
	}
	if s := d.status(); s != d.lastStatus {
		d.lastStatus = s
		d.notify("STATUS=" + s)
	}
}

// status is the STATUS= line while serving.
func (d *Daemon) status() string {
	s := "serving; audit store " + d.capacity.Last().State.String()
	if d.activated {
		s += "; socket from systemd"
	}
	if d.backendUnready != "" {
		s += "; not ready: openbao cluster unreachable"
	}
	return s
}

// live is the liveness probe (/healthz): the tick is not late.
func (d *Daemon) live() error { return d.ticks.late() }

// ready is the readiness probe (/readyz): serving, not stopping, the
// tick is not late, and the backend reaches its cluster (or has failed to
// for less than openbao.readiness_grace_ms; see reachability.go).
func (d *Daemon) ready() error {
	if d.stopping.Load() {
		return errors.New("stopping")
	}
	if err := d.ticks.late(); err != nil {
		return err
	}
	return d.backendReady(d.seams.now())
}

// closeWaitingFor bounds how long closeWaiting takes the connections
// already queued on a listener, and closeWaitingMax how many: the socket
// unit's Backlog=4096.
const (
	closeWaitingFor = 100 * time.Millisecond
	closeWaitingMax = 4096
)

// closeWaiting accepts and closes, unanswered, the connections already
// waiting on l, a socket systemd handed over to a daemon that cannot
// start. Left queued, each one makes systemd start the service again at
// once: five failed starts in a fraction of a second, then the start
// limit fails the socket unit itself, and every later caller is refused
// until someone runs reset-failed (measured under systemd 252). Taken,
// the callers get their answer now (the connection closes: the client
// says the daemon is not serving), the socket unit keeps listening, and
// the next caller, or the operator's systemctl start once the
// configuration is fixed, starts the service again. It returns how many
// it closed.
func closeWaiting(l net.Listener) int {
	dl, ok := l.(interface{ SetDeadline(time.Time) error })
	if !ok || dl.SetDeadline(time.Now().Add(closeWaitingFor)) != nil {
		return 0
	}
	n := 0
	for n < closeWaitingMax {
		c, err := l.Accept()
		if err != nil {
			break
		}
		c.Close()
		n++
	}
	return n
}

// CloseActivated is closeWaiting for a start that fails before the daemon
// took the sockets systemd handed over (serve's configuration failed to
// load): it takes them (LISTEN_FDS, LISTEN_PID), closes the connections
// waiting on each, and closes them. It returns how many connections it
// closed; 0 when the process was not socket activated.
func CloseActivated() int {
	if os.Getenv("LISTEN_FDS") == "" {
		return 0
	}
	if pid, err := strconv.Atoi(os.Getenv("LISTEN_PID")); err != nil || pid != os.Getpid() {
		return 0
	}
	ls, err := activation.Listeners()
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range ls {
		if l == nil {
			continue
		}
		if ul, ok := l.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false)
		}
		n += closeWaiting(l)
		l.Close()
	}
	return n
}
