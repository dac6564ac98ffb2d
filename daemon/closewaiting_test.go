package daemon

import (
	"errors"
	"net"
	"testing"
	"time"
)

// waitingListener is a socket handed over by systemd with waiting
// connections: Accept hands out queued of them, then fails as a listener
// past its deadline does.
type waitingListener struct {
	queued      int
	accepted    int
	closed      int
	deadline    time.Time
	deadlineErr error
}

type waitingConn struct {
	net.Conn
	l *waitingListener
}

func (c waitingConn) Close() error { c.l.closed++; return nil }

func (l *waitingListener) Accept() (net.Conn, error) {
	if l.accepted == l.queued {
		return nil, errors.New("i/o timeout")
	}
	l.accepted++
	return waitingConn{l: l}, nil
}

func (l *waitingListener) Close() error { return nil }
func (l *waitingListener) Addr() net.Addr {
	return &net.UnixAddr{Name: "/run/registrar-otel/registrar.sock", Net: "unix"}
}

func (l *waitingListener) SetDeadline(t time.Time) error {
	l.deadline = t
	return l.deadlineErr
}

// A start that fails closes, unanswered, every connection already waiting,
// within closeWaitingFor: it sets that deadline and takes connections until
// Accept fails.
func TestCloseWaitingClosesEveryConnectionWaiting(t *testing.T) {
	for _, queued := range []int{0, 1, 3} {
		l := &waitingListener{queued: queued}
		before := time.Now()
		n := closeWaiting(l)
		if n != queued || l.accepted != queued || l.closed != queued {
			t.Errorf("%d waiting: closeWaiting = %d, %d accepted, %d closed, want %d of each", queued, n, l.accepted, l.closed, queued)
		}
		if l.deadline.Before(before.Add(closeWaitingFor)) || l.deadline.After(time.Now().Add(closeWaitingFor)) {
			t.Errorf("deadline %v, want closeWaitingFor (%v) after the call", l.deadline, closeWaitingFor)
		}
	}
}

// However many wait (a flood at the socket), it takes at most
// closeWaitingMax, the socket unit's backlog.
func TestCloseWaitingTakesAtMostTheBacklog(t *testing.T) {
	l := &waitingListener{queued: 3 * closeWaitingMax}
	if n := closeWaiting(l); n != closeWaitingMax || l.accepted != closeWaitingMax || l.closed != closeWaitingMax {
		t.Errorf("a queue of 3 backlogs: closeWaiting = %d, %d accepted, %d closed, want %d of each", n, l.accepted, l.closed, closeWaitingMax)
	}
}

// A listener whose deadline cannot be set is left alone: without the
// deadline, Accept could wait for ever.
func TestCloseWaitingTakesNothingWithoutADeadline(t *testing.T) {
	l := &waitingListener{queued: 3, deadlineErr: errors.New("not supported")}
	if n := closeWaiting(l); n != 0 || l.accepted != 0 {
		t.Errorf("SetDeadline failing: closeWaiting = %d, %d accepted, want none", n, l.accepted)
	}
	if n := closeWaiting(noDeadlineListener{l}); n != 0 || l.accepted != 0 {
		t.Errorf("no SetDeadline: closeWaiting = %d, %d accepted, want none", n, l.accepted)
	}
}

// noDeadlineListener hides SetDeadline.
type noDeadlineListener struct{ l *waitingListener }

func (l noDeadlineListener) Accept() (net.Conn, error) { return l.l.Accept() }
func (l noDeadlineListener) Close() error              { return nil }
func (l noDeadlineListener) Addr() net.Addr            { return l.l.Addr() }
