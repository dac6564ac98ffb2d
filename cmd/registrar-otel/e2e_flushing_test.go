package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The attack of issue 27, item 8, against the real daemon: connections
// evicted while their answer was flushing to a caller that never reads
// stayed open for the 30 s write timeout (300 such callers held 315
// descriptors while the gauge said 64). Now the daemon's sockets stay
// within the cap plus the evicted ones still finishing (at most 8), and
// those are closed within a second.
func TestEndToEndCallersThatNeverReadHoldNoDescriptorsPastTheCap(t *testing.T) {
	const maxConns, callers = 8, 120
	d := startDaemon(t, fmt.Sprintf("unix_max_conns = %d\n", maxConns), "")
	d.scrape() // its keep-alive connection is part of the daemon at rest
	base := d.openSockets()
	// processed is how many callers the budget has decided on: the cap's
	// worth admitted, every other one admitted by evicting another or
	// refused.
	processed := func() int {
		m := d.scrape()
		return maxConns + int(rejectedIn(m, "unix", "idle_evicted")) + int(rejectedIn(m, "unix", "conn_cap"))
	}
	peak := 0
	sample := func() int {
		n := d.openSockets() - base
		peak = max(peak, n)
		return n
	}
	// Each caller pipelines health requests and never reads: enough
	// answers to fill the socket buffers, so the daemon's flush blocks.
	pipelined := strings.Repeat("GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n", 2000)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range callers {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte(pipelined)) // stops when the daemon stops reading, or it closes c
		// The next caller comes once this one's requests are no longer
		// read: the daemon is stuck flushing an answer to it (or has
		// closed it), so the budget sees a flushing connection, not one
		// idle between two pipelined requests.
		settled(t, c)
		sample()
	}
	// Sampled until the budget has seen every caller (the kernel's backlog
	// holds the rest meanwhile), bounded far below the 30 s write timeout.
	deadline := time.Now().Add(20 * time.Second)
	for processed() < callers {
		if time.Now().After(deadline) {
			t.Fatalf("the budget decided on %d of %d callers within 20 s", processed(), callers)
		}
		sample()
		time.Sleep(5 * time.Millisecond)
	}
	m := d.scrape()
	t.Logf("peak %d sockets over %d at rest; idle_evicted %v, conn_cap %v, identity_conn_cap %v", peak, base, rejectedIn(m, "unix", "idle_evicted"), rejectedIn(m, "unix", "conn_cap"), rejectedIn(m, "unix", "identity_conn_cap"))
	// The bound: the cap, the evicted ones finishing, and one the accept
	// loop may hold before the budget decides.
	if bound := maxConns + 8 + 1; peak > bound {
		t.Fatalf("%d callers that never read: the daemon held %d sockets over its %d at rest, want at most %d (cap %d + 8)",
			callers, peak, base, bound, maxConns)
	}
	if ev := rejectedIn(d.scrape(), "unix", "idle_evicted"); ev < 8 {
		t.Errorf("idle_evicted %v, want the flushing connections evicted", ev)
	}
	// Within a second or so of the last eviction, only the cap's worth is
	// open.
	deadline = time.Now().Add(5 * time.Second)
	for sample() > maxConns {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the last caller: %d sockets over the daemon's %d at rest, want at most the cap %d", sample(), base, maxConns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openSockets counts the daemon's open socket descriptors.
func (d *daemonProc) openSockets() int {
	d.t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		d.t.Fatalf("reading the daemon's descriptors: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// settled returns once the daemon has stopped reading what c sent: the
// bytes c has sent that the daemon has not read (TIOCOUTQ) are the same
// over three samples 10 ms apart. Bounded at 2 s.
func settled(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	unread := func() int32 {
		var n int32
		_ = raw.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		})
		return n
	}
	prev, same := unread(), 0
	for deadline := time.Now().Add(2 * time.Second); same < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := unread(); n == prev {
			same++
		} else {
			prev, same = n, 0
		}
	}
}
