package vaulttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// leaderTimeout bounds how long a cluster may take to elect a leader that
// answers (after a start or a kill): raft elections take a second or two
// with performance_multiplier = 1; a loaded 2-core machine stretches it.
const leaderTimeout = 60 * time.Second

// Cluster is a raft cluster of Vault servers on loopback, formed the way an
// operator forms one: every node's storage stanza lists the others in
// retry_join blocks, the first node is initialised and unsealed, and each
// other node joins by itself and is then unsealed with the cluster's key.
// Every node is killed when the test ends. It is for tests only; a Cluster
// is safe for use by one test goroutine at a time.
type Cluster struct {
	// Nodes are the cluster's servers, in start order; each one's Addr is
	// its API address (its api_addr).
	Nodes []*Server
	// RootToken is a root token of the cluster.
	RootToken string

	t testing.TB
}

// StartCluster starts an n-node raft cluster (n ≥ 1) with raft's tight
// timing (performance_multiplier = 1, as Vault recommends for production),
// KV version 2 at secret/ and AppRole at approle/, and returns once every
// node is unsealed and one is the active node.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("vaulttest: StartCluster(%d): at least one node", n)
	}
	c := &Cluster{t: t}
	clusters := make([]string, n)
	for i := range n {
		s := newServer(t, false)
		clusters[i] = freeLoopbackAddr(t)
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		var join strings.Builder
		for j, o := range c.Nodes {
			if j != i {
				fmt.Fprintf(&join, "  retry_join {\n    leader_api_addr = %q\n  }\n", o.Addr)
			}
		}
		s.writeRaftConfig(fmt.Sprintf("node-%d", i+1), "  performance_multiplier = 1\n"+join.String(), clusters[i])
		s.start()
	}

	first := c.Nodes[0]
	init, err := first.client("").Sys().Init(&api.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		first.fatalf("sys/init: %v", err)
	}
	c.RootToken = init.RootToken
	for _, s := range c.Nodes {
		s.RootToken, s.unsealKey = init.RootToken, init.KeysB64[0]
	}
	first.unseal()
	// Autopilot lets a joined node vote once it has been healthy for the
	// stabilization time (10 s by default); a test cluster need not wait
	// that long.
	if _, err := first.Client().Logical().Write("sys/storage/raft/autopilot/configuration", map[string]any{"server_stabilization_time": "1s"}); err != nil {
		first.fatalf("autopilot configuration: %v", err)
	}
	for _, s := range c.Nodes[1:] {
		// retry_join asked a leader for a challenge and now waits for the
		// key to answer it (it retries every 2 s until node 1 answers).
		s.waitLog("waiting for unseal keys to be supplied")
		s.unsealStandby()
	}
	root := c.Client()
	if err := root.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		first.fatalf("mounting KV v2 at secret/: %v", err)
	}
	first.enableAppRole()
	first.waitForKV()
	c.WaitLeader(nil)
	c.waitVoters(n)
	return c
}

// Voters returns how many servers raft counts as voters.
func (c *Cluster) Voters() (int, error) {
	s, err := c.Client().Logical().Read("sys/storage/raft/configuration")
	if err != nil || s == nil {
		return 0, fmt.Errorf("sys/storage/raft/configuration: %v", err)
	}
	cfg, _ := s.Data["config"].(map[string]any)
	servers, _ := cfg["servers"].([]any)
	n := 0
	for _, e := range servers {
		if m, _ := e.(map[string]any); m["voter"] == true {
			n++
		}
	}
	return n, nil
}

// waitVoters waits (bounded) until autopilot has made n servers voters: a
// cluster whose joined nodes do not vote yet loses its quorum with its
// leader.
func (c *Cluster) waitVoters(n int) {
	c.t.Helper()
	deadline := time.Now().Add(leaderTimeout)
	for {
		marks := c.marks()
		got, err := c.Voters()
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("vaulttest: %d raft voters (%v) after %s, want %d", got, err, leaderTimeout, n)
		}
		c.waitAnyLog(marks, time.Until(deadline))
	}
}

// unsealStandby unseals a node that joins (or rejoins) a cluster whose
// active node is another: it waits until the node is a standby.
func (s *Server) unsealStandby() {
	s.t.Helper()
	mark := s.out.count()
	if _, err := s.client("").Sys().Unseal(s.unsealKey); err != nil {
		s.fatalf("unsealing: %v", err)
	}
	if err := s.out.waitAfterAny(mark, []string{"entering standby mode", "post-unseal setup complete"}, s.done, startTimeout); err != nil {
		s.fatalf("waiting for the node to join as a standby: %v", err)
	}
}

// Addrs returns every node's API address, in start order: what
// openbao.address lists.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// Client returns a root client of the active node, or else of the first
// running node (a standby forwards to the active node once it knows it).
func (c *Cluster) Client() *api.Client {
	c.t.Helper()
	if l, err := c.Leader(); err == nil {
		return l.Client()
	}
	for _, s := range c.Nodes {
		if s.Running() {
			return s.Client()
		}
	}
	c.t.Fatal("vaulttest: no node of the cluster is running")
	return nil
}

// Running reports whether the server's process is running (not killed).
func (s *Server) Running() bool { return s.cmd != nil }

// Leader returns the active node as the live nodes see it now, or an error
// when none names one that is running and says it is active.
func (c *Cluster) Leader() (*Server, error) {
	var errs []error
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := s.client("").Sys().LeaderWithContext(ctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Addr, err))
			continue
		}
		if l.IsSelf {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no running node is active: %w", errors.Join(errs...))
}

// WaitLeader waits (bounded) until a running node other than not is the
// active node and answers a KV read through itself, and returns it.
// Each retry waits for a new line in some node's log, never for a fixed
// time.
func (c *Cluster) WaitLeader(not *Server) *Server {
	c.t.Helper()
	deadline := time.Now().Add(leaderTimeout)
	var last error
	for time.Now().Before(deadline) {
		marks := c.marks()
		l, err := c.Leader()
		if err == nil && l != not {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = l.Client().KVv2("secret").Get(ctx, "vaultdev-probe")
			cancel()
			if err == nil {
				return l
			}
		}
		if err == nil {
			err = errors.New("the old leader is still active")
		}
		last = err
		c.waitAnyLog(marks, time.Until(deadline))
	}
	c.t.Fatalf("vaulttest: no new leader within %s: %v", leaderTimeout, last)
	return nil
}

// marks returns each running node's log length.
func (c *Cluster) marks() []int {
	m := make([]int, len(c.Nodes))
	for i, s := range c.Nodes {
		m[i] = s.out.count()
	}
	return m
}

// waitAnyLog waits until some running node logs a line after marks, or
// for at most d (raft logs on every election step; a quiet cluster is
// asked again after a second).
func (c *Cluster) waitAnyLog(marks []int, d time.Duration) {
	d = min(d, time.Second)
	changed := make(chan struct{}, len(c.Nodes))
	stop := make(chan struct{})
	defer close(stop)
	for i, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		go func(s *Server, mark int) {
			if s.out.waitAfterStop(mark, "", s.done, d, stop) == nil {
				changed <- struct{}{}
			}
		}(s, marks[i])
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	}
}

// Kill kills node s of the cluster with SIGKILL and waits for it to exit.
func (c *Cluster) Kill(s *Server) { s.Kill() }

// Restart starts a killed node again with its raft data and unseals it;
// it rejoins the cluster (as a standby, when another node is active).
func (c *Cluster) Restart(s *Server) {
	c.t.Helper()
	if s.cmd != nil {
		c.t.Fatal("vaulttest: Restart of a running node")
	}
	s.start()
	s.unsealStandby()
	c.waitVoters(len(c.Nodes))
	// A standby learns the active node a moment after it unseals; until
	// then it answers "active cluster node not found".
	deadline := time.Now().Add(leaderTimeout)
	for {
		marks := c.marks()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.Client().KVv2("secret").Get(ctx, "vaultdev-probe")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.fatalf("the restarted node does not reach the active node after %s: %v", leaderTimeout, err)
		}
		c.waitAnyLog(marks, time.Until(deadline))
	}
}
