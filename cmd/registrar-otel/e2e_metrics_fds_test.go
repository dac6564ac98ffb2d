package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// The attack of issue 27, item 4: under a 512-descriptor limit, 500 idle
// connections to the metrics listener (any local uid reaches it) took
// every descriptor and `registrar-otel mint` timed out. The listener holds
// at most telemetry.MetricsMaxConns now, closing the rest at once.
func TestEndToEndIdleMetricsConnectionsLeaveMintsAnswered(t *testing.T) {
	bin := buildBinary(t)
	dir := shortTempDir(t)
	socket, _, _ := daemonPaths(dir)
	cfg := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "127.0.0.1:0"`+"\n"), 0o600)
	// The shell sets the soft and hard limit, then becomes the daemon.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 512 && exec "$0" serve --config "$1"`, bin, cfg)
	p, line := startLogged(t, "daemon", cmd, "registrar-otel serving")
	m := metricsRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no metrics address in %q", line)
	}
	addr := m[1][len("http://") : len(m[1])-len("/metrics")]

	client := func() *wire.Client {
		// The CLI's patience: a mint that cannot get a descriptor waits
		// for the idle connections' 10 s header timeout, and fails this.
		return wire.NewUnixClient(socket, wire.WithoutKeepAlive(), wire.WithTimeout(5*time.Second))
	}
	mintOK(t, client()) // warm up: the bbolt file, the audit generation

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range 500 {
		c, err := net.DialTimeout("tcp", addr, e2eIODeadline)
		if err != nil {
			t.Fatalf("metrics connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	for i := range 3 {
		req := reviewMint(fmt.Sprintf("h%d", i+2), 1)
		res, err := client().Mint(context.Background(), req)
		if err != nil || !res.OK() {
			t.Fatalf("mint %d with 500 idle metrics connections open: %+v, %v; want it answered", i, res, err)
		}
	}
	// The daemon holds the capped few, not the 500: read after the mints,
	// by which time the connections beyond the cap were accepted and closed.
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fds); n > 100 {
		t.Errorf("the daemon holds %d descriptors with 500 idle metrics connections open, want at most 100 (the cap is %d)", n, telemetry.MetricsMaxConns)
	}
	p.terminate(t, "daemon")
}
