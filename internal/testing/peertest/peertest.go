// Package peertest runs a foreign server for the tests of who a client
// trusts on a unix socket: the test binary itself, re-run as another uid,
// answering every request on a socket 200 with a forged body and reporting
// each request's path. A test package calls ServeIfAsked first thing in
// its TestMain and Start from its tests.
package peertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Env names the socket a test binary re-run by Start serves on.
const Env = "REGISTRAR_TEST_FOREIGN_SERVER"

// ServeIfAsked serves as the foreign server, and exits, when the process
// was started by Start; otherwise it returns at once. It serves until its
// stdin closes.
func ServeIfAsked() {
	socket := os.Getenv(Env)
	if socket == "" {
		return
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("request", r.URL.Path)
		io.WriteString(w, "a forged answer")
	}))
	os.Exit(0)
}

// Start runs bin (a copy of the test binary that uid may execute) as uid,
// serving on socket (in a directory uid may write), and returns once it
// listens. The returned function waits, up to 10 s, until the server has
// got want requests in all, and returns their paths. A cleanup stops it.
func Start(t *testing.T, bin, socket string, uid int) (requests func(want int) []string) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), Env+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "ready" {
			t.Fatalf("the foreign server: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the foreign server did not start")
	}
	var got []string
	return func(want int) []string {
		deadline := time.After(10 * time.Second)
		for len(got) < want {
			select {
			case l, ok := <-lines:
				if !ok {
					return got
				}
				if p, found := strings.CutPrefix(l, "request "); found {
					got = append(got, p)
				}
			case <-deadline:
				return got
			}
		}
		return got
	}
}
