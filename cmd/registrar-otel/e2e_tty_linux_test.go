//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair with the kernel's /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Skipf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Skipf("ptsname: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open the pty's slave: %v", err)
	}
	return m, s
}

// On a terminal the progress is one live line redrawn in place, and the
// last state drawn is the run's true final count (not a stale tick).
func TestLoadWaveOnATerminalEndsTheLiveLineAtTheFinalCount(t *testing.T) {
	d := startDaemon(t, "", "")
	master, slave := openPTY(t)
	defer master.Close()
	cmd := exec.Command(d.bin, "load", "wave", "--socket", d.socket, "--audit-dir", "-", "--hosts", "4",
		"--modules-per-host", "3", "--concurrency", "2", "--settle", "0")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it; EOF on master once it exits
	var tty bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&tty, master); close(done) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("load wave: %v\n%s", err, stdout.String())
	}
	<-done                                                // EIO on master after the last writer closed
	out := strings.ReplaceAll(tty.String(), "\r\n", "\n") // the pty's output processing
	draws := strings.Split(out, "\r\x1b[K")
	if len(draws) < 2 {
		t.Fatalf("no live line on the terminal: %q", out)
	}
	last := draws[len(draws)-1]
	if !strings.Contains(last, " 12/12 done  admitted 12 ") || !strings.HasSuffix(last, "\n") || strings.Count(last, "\n") != 1 {
		t.Fatalf("last live line %q, want the final 12/12 ended by one newline (whole output %q)", last, out)
	}
	if strings.Contains(stdout.String(), "done  admitted") {
		t.Fatalf("progress leaked to stdout:\n%s", stdout.String())
	}
}
