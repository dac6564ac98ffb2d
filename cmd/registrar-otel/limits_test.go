package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// noVerbs fails the test if a verb is reached: the limits commands never
// call one.
type noVerbs struct{ t *testing.T }

func (v noVerbs) Mint(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
	v.t.Error("a limits command reached mint")
	return registrar.MintResult{}, errors.New("unreachable")
}

func (v noVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	v.t.Error("a limits command reached deregister")
	return registrar.DeregisterResult{}, errors.New("unreachable")
}

// fakeLimiter is the daemon's side of the two hooks, with fixed answers.
type fakeLimiter struct {
	calls    atomic.Int32
	showReq  wire.LimitsRequest
	resetReq wire.LimitsResetRequest
	caller   string
	show     wire.LimitsAnswer
	reset    wire.LimitsResetAnswer
}

func (f *fakeLimiter) limits(_ context.Context, req wire.LimitsRequest) (wire.LimitsAnswer, error) {
	f.calls.Add(1)
	f.showReq = req
	return f.show, nil
}

func (f *fakeLimiter) limitsReset(_ context.Context, caller string, req wire.LimitsResetRequest) (wire.LimitsResetAnswer, error) {
	f.calls.Add(1)
	f.caller, f.resetReq = caller, req
	return f.reset, nil
}

// limitsDaemon serves f's hooks (none when f is nil) with the uid policy
// allowed on a unix socket, as the daemon's server does, and returns the
// socket.
func limitsDaemon(t *testing.T, allowed func(uint32) bool, f *fakeLimiter) string {
	t.Helper()
	h, err := health.NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	o := server.Options{Verbs: noVerbs{t}, Health: h, AdminAllowed: allowed}
	if f != nil {
		o.Limits, o.LimitsReset = f.limits, f.limitsReset
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(shortTempDir(t), "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return path
}

func bl(state wire.KeyState, tokens, burst uint32, ms, retry uint64) wire.BucketLimits {
	return wire.BucketLimits{State: state, Tokens: tokens, Burst: burst, RefillIntervalMS: ms, RetryAfterSeconds: retry}
}

// sampleShow is a map with a control-plane identity (a shadow on its mint
// admission bucket), an agent on the remote pool's overflow bucket, and
// both pools' overflow buckets.
func sampleShow() wire.LimitsAnswer {
	shadow := bl(wire.KeyEntry, 0, 800, 100, 1)
	keys := func(admission, shadowed wire.BucketLimits, withShadow bool) []wire.KeyLimits {
		var ks []wire.KeyLimits
		for v := range vocab.Verb(vocab.NumVerbs) {
			ks = append(ks, wire.KeyLimits{Verb: v, Bucket: vocab.PredecisionRefusal, BucketLimits: bl(wire.KeyAbsent, 32, 32, 1000, 0)})
			k := wire.KeyLimits{Verb: v, Bucket: vocab.Admission, BucketLimits: admission}
			if v == vocab.Mint {
				k.BucketLimits = shadowed
				if withShadow {
					k.Shadow = &shadow
				}
			}
			ks = append(ks, k)
		}
		return ks
	}
	overflow := func(p wire.Pool, entries int) wire.PoolOverflow {
		po := wire.PoolOverflow{Pool: p, Entries: entries, MaxEntries: 256}
		for v := range vocab.Verb(vocab.NumVerbs) {
			for b := range vocab.Bucket(vocab.NumBuckets) {
				ob := wire.OverflowBucket{Policy: "default", Verb: v, Bucket: b, Burst: 8, RefillIntervalMS: 3600000, Tokens: 8}
				if p == wire.PoolRemote && v == vocab.Mint && b == vocab.Admission {
					ob.Tokens, ob.RetryAfterSeconds = 0, 2917 // the agent's mints fall here
				}
				po.Buckets = append(po.Buckets, ob)
			}
		}
		return po
	}
	return wire.LimitsAnswer{
		Identities: []wire.IdentityLimits{
			{Identity: "registrar-client:uri:spiffe://example.org/agent/h7", Policy: "default", Pool: wire.PoolRemote,
				Buckets: keys(bl(wire.KeyOverflow, 8, 8, 3600000, 0), bl(wire.KeyOverflow, 0, 8, 3600000, 2917), false)},
			{Identity: "unix-peer:uid=0", Policy: "control-plane", Pool: wire.PoolLocal,
				Buckets: keys(bl(wire.KeyAbsent, 1600, 1600, 100, 0), bl(wire.KeyEntry, 0, 1600, 100, 1), true)},
		},
		Overflow: []wire.PoolOverflow{overflow(wire.PoolLocal, 1), overflow(wire.PoolRemote, 256)},
	}
}

func runLimits(run func([]string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func show(args []string, out, errOut *bytes.Buffer) int {
	return dispatch(append([]string{"limits", "show"}, args...), out, errOut)
}
func reset(args []string, out, errOut *bytes.Buffer) int {
	return dispatch(append([]string{"limits", "reset"}, args...), out, errOut)
}

func TestGoldenLimitsShow(t *testing.T) {
	f := &fakeLimiter{show: sampleShow()}
	sock := limitsDaemon(t, nil, f) // the default policy: this process is the daemon's uid
	code, out, errOut := runLimits(show, "--socket", sock)
	if code != exitOK || errOut != "" {
		t.Fatalf("limits show: exit %d, stderr %q", code, errOut)
	}
	golden(t, "limits_show.txt", []byte(out))
	code, out, errOut = runLimits(show, "--socket", sock, "--json")
	if code != exitOK || errOut != "" {
		t.Fatalf("limits show --json: exit %d, stderr %q", code, errOut)
	}
	golden(t, "limits_show.json", []byte(out))
	if f.showReq.Identity != "" {
		t.Errorf("the daemon was asked for %q, want every identity", f.showReq.Identity)
	}

	// One identity: asked for by name.
	f.show.Identities = f.show.Identities[1:]
	code, out, _ = runLimits(show, "--socket", sock, "--identity", "unix-peer:uid=0")
	if code != exitOK || f.showReq.Identity != "unix-peer:uid=0" || !strings.HasPrefix(out, "unix-peer:uid=0  (policy control-plane, pool local)\n") {
		t.Errorf("limits show --identity: exit %d, asked %+v, stdout:\n%s", code, f.showReq, out)
	}
	f.show.Identities = nil
	if code, out, _ = runLimits(show, "--socket", sock); code != exitOK || !strings.HasPrefix(out, "no identity has an entry in the limiter's map\n") {
		t.Errorf("an empty map: exit %d, stdout:\n%s", code, out)
	}
}

func TestGoldenLimitsReset(t *testing.T) {
	shadow := uint32(400)
	id := "registrar-client:uri:spiffe://example.org/agent/h7"
	f := &fakeLimiter{reset: wire.LimitsResetAnswer{Identity: id, Policy: "agents", Pool: wire.PoolRemote, Recorded: true, Reset: []wire.KeyReset{
		{Verb: vocab.Mint, Bucket: vocab.Admission, Before: wire.KeyEntry, TokensBefore: 0, Tokens: 8, ShadowTokens: &shadow},
	}}}
	sock := limitsDaemon(t, nil, f)
	code, out, errOut := runLimits(reset, "--socket", sock, "--identity", id, "--verb", "mint", "--bucket", "admission")
	if code != exitOK || errOut != "" {
		t.Fatalf("limits reset: exit %d, stderr %q", code, errOut)
	}
	golden(t, "limits_reset.txt", []byte(out))
	wantCaller := server.UnixIdentity(uint32(os.Geteuid()))
	if f.caller != wantCaller || f.resetReq.Identity != id || f.resetReq.Verb == nil || *f.resetReq.Verb != vocab.Mint || f.resetReq.Bucket == nil || *f.resetReq.Bucket != vocab.Admission {
		t.Errorf("the daemon reset %+v for %q, want mint admission of %s for %s", f.resetReq, f.caller, id, wantCaller)
	}
	code, out, errOut = runLimits(reset, "--socket", sock, "--identity", id, "--json")
	if code != exitOK || errOut != "" {
		t.Fatalf("limits reset --json: exit %d, stderr %q", code, errOut)
	}
	golden(t, "limits_reset.json", []byte(out))
	if f.resetReq.Verb != nil || f.resetReq.Bucket != nil {
		t.Errorf("without --verb and --bucket the daemon was asked %+v, want every bucket", f.resetReq)
	}

	// A reset the daemon did not record is a failure, said on stderr.
	f.reset.Recorded = false
	code, out, errOut = runLimits(reset, "--socket", sock, "--identity", id)
	if code != exitFailure || !strings.Contains(out, "NOT recorded") || !strings.Contains(errOut, "did not record the reset") {
		t.Errorf("an unrecorded reset: exit %d, stdout %q, stderr %q; want 1 and both saying so", code, out, errOut)
	}
}

// Another uid is refused, exit 1, with what to do; nothing is reset.
func TestLimitsCommandsByAnotherUIDExitOne(t *testing.T) {
	f := &fakeLimiter{}
	sock := limitsDaemon(t, func(uint32) bool { return false }, f)
	for _, tc := range []struct {
		run  func([]string, *bytes.Buffer, *bytes.Buffer) int
		name string
		args []string
	}{
		{show, "limits show", nil},
		{reset, "limits reset", []string{"--identity", "unix-peer:uid=0"}},
	} {
		code, out, errOut := runLimits(tc.run, append([]string{"--socket", sock}, tc.args...)...)
		if code != exitFailure || out != "" || !strings.Contains(errOut, "registrar-otel "+tc.name+": AdminForbidden (HTTP 403)") ||
			!strings.Contains(errOut, "sudo -u registrar-otel registrar-otel "+tc.name) {
			t.Errorf("%s by a refused uid: exit %d, stdout %q, stderr %q", tc.name, code, out, errOut)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("the limiter was reached %d times by a refused uid", n)
	}
}

// A daemon whose server has no hooks answers AdminUnsupported: exit 1.
func TestLimitsCommandsAgainstADaemonWithoutALimiterExitOne(t *testing.T) {
	sock := limitsDaemon(t, nil, nil)
	code, _, errOut := runLimits(show, "--socket", sock)
	if code != exitFailure || !strings.Contains(errOut, "AdminUnsupported (HTTP 501): this server has no limiter to inspect") {
		t.Errorf("show: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runLimits(reset, "--socket", sock, "--identity", "unix-peer:uid=0")
	if code != exitFailure || !strings.Contains(errOut, "AdminUnsupported (HTTP 501)") {
		t.Errorf("reset: exit %d, stderr %q", code, errOut)
	}
}

// Bad flags are usage errors (exit 2) naming the flag, and never reach the
// daemon.
func TestLimitsCommandsUsageErrors(t *testing.T) {
	f := &fakeLimiter{}
	sock := limitsDaemon(t, nil, f)
	long := strings.Repeat("a", wire.MaxIdentityBytes+1)
	for _, tc := range []struct {
		run  func([]string, *bytes.Buffer, *bytes.Buffer) int
		args []string
		want string
	}{
		{reset, nil, "registrar-otel limits reset: --identity ID is required"},
		{reset, []string{"--identity", ""}, "--identity: empty"},
		{reset, []string{"--identity", long}, "--identity: 513 bytes, longer than the 512 bytes an identity may have"},
		{reset, []string{"--identity", "a\tb"}, "--identity: a control character (0x09) at byte 1"},
		{reset, []string{"--identity", "a", "--verb", "mnit"}, `--verb: got "mnit", want mint or deregister; did you mean mint?`},
		{reset, []string{"--identity", "a", "--bucket", "admision"}, `--bucket: got "admision", want predecision_refusal or admission; did you mean admission?`},
		{reset, []string{"--identity", "a", "--bukcet", "admission"}, "unknown flag --bukcet; did you mean --bucket?"},
		{show, []string{"--identity", ""}, "registrar-otel limits show: --identity: empty"},
		{show, []string{"--identity", long}, "--identity: 513 bytes"},
		{show, []string{"unix-peer:uid=0"}, `unexpected argument "unix-peer:uid=0"`},
	} {
		code, out, errOut := runLimits(tc.run, append([]string{"--socket", sock}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "-h' for usage") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("the daemon was reached %d times by usage errors", n)
	}

	// The daemon's own AdminBadRequest (a client older than its rules) is
	// the caller's error too.
	bad := serveFixed(t, 400, `{"error":"AdminBadRequest","detail":"identity: not one the daemon accepts"}`)
	if code, _, errOut := runLimits(show, "--socket", bad, "--identity", "a"); code != exitUsage || !strings.Contains(errOut, "AdminBadRequest (HTTP 400): identity: not one the daemon accepts") {
		t.Errorf("the daemon's AdminBadRequest: exit %d, stderr %q; want 2", code, errOut)
	}
}

// No daemon, or not the protocol: exit 3 naming the socket.
func TestLimitsCommandsWithoutADaemonExitThree(t *testing.T) {
	missing := filepath.Join(shortTempDir(t), "absent.sock")
	if code, _, errOut := runLimits(show, "--socket", missing); code != exitTransport || !strings.Contains(errOut, "no daemon socket at "+missing) {
		t.Errorf("show, no socket: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runLimits(reset, "--socket", missing, "--identity", "a"); code != exitTransport || !strings.Contains(errOut, "no daemon socket at "+missing) {
		t.Errorf("reset, no socket: exit %d, stderr %q", code, errOut)
	}
	garbage := serveFixed(t, 200, "<html>")
	if code, _, errOut := runLimits(show, "--socket", garbage); code != exitTransport || !strings.Contains(errOut, "no protocol answer") {
		t.Errorf("show, not the protocol: exit %d, stderr %q", code, errOut)
	}
}
