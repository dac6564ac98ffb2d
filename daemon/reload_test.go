package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// reloadRig is a daemon started from a file, so a reload has one to re-read.
type reloadRig struct {
	*running
	logs *logBuffer
	path string
	dir  string
}

// reloadFile is the file's text: the paths under dir, then extra lines in
// [registrar], then the components table.
func reloadFile(dir, registrar, components string) string {
	return fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
maintenance_interval_ms = 3600000
%s
%s
[telemetry]
metrics_listen = ""
`, filepath.Join(dir, "run", "r.sock"), filepath.Join(dir, "lib"), filepath.Join(dir, "audit"), registrar, components)
}

const twoComponents = `[registrar.components.review]
multiplicity = "many-per-host"
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
`

const startLimits = `rate_limit_admission_burst = 3
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = 2
rate_limit_predecision_refusal_refill_interval_ms = 3600000
`

func startFromFile(t *testing.T) *reloadRig {
	t.Helper()
	dir, err := os.MkdirTemp("", "rld-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rr := &reloadRig{dir: dir, path: filepath.Join(dir, "registrar.toml")}
	rr.write(t, reloadFile(dir, startLimits, twoComponents), 0o600)
	cfg, err := config.Load(rr.path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rr.running, rr.logs = startLogged(t, cfg, seams{})
	return rr
}

func (rr *reloadRig) write(t *testing.T, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(rr.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rr.path, mode); err != nil {
		t.Fatal(err)
	}
}

func mintAs(t *testing.T, c *wire.Client, component string, instance uint32) *wire.Response {
	t.Helper()
	m := mint("svc")
	m.Component, m.Spec.Component, m.Instance = component, component, instance
	resp, err := c.Mint(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestReloadAppliesTheLiveKeysWithoutResettingBuckets(t *testing.T) {
	rr := startFromFile(t)
	for i := range 3 {
		if resp := mintAs(t, rr.client, "review", uint32(i+1)); !resp.OK() {
			t.Fatalf("mint %d within the burst: %+v", i, resp)
		}
	}
	if resp := mintAs(t, rr.client, "review", 9); resp.ErrorID != wire.RegistrarBusy {
		t.Fatalf("mint past the burst: %+v, want RegistrarBusy", resp)
	}
	rr.write(t, reloadFile(rr.dir, `rate_limit_admission_burst = 64
rate_limit_admission_refill_interval_ms = 1800000
rate_limit_predecision_refusal_burst = 2
rate_limit_predecision_refusal_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 30
audit_store_reserve_bytes = 1048576
`, `[registrar.components.review]
multiplicity = "many-per-host"
`), 0o600)
	changes, err := rr.d.Reload(context.Background())
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	var keys []string
	for _, c := range changes {
		keys = append(keys, c.Key)
	}
	wantKeys := "registrar.audit_store_reserve_bytes registrar.rate_limit_admission_burst registrar.rate_limit_admission_refill_interval_ms registrar.rate_limit_coalesce_window_seconds registrar.components.<name>.multiplicity"
	if strings.Join(keys, " ") != wantKeys {
		t.Fatalf("changed keys %v, want %s", keys, wantKeys)
	}
	// The drained identity is still drained: no fresh burst.
	if resp := mintAs(t, rr.client, "review", 10); resp.ErrorID != wire.RegistrarBusy {
		t.Fatalf("drained identity after the reload: %+v, want RegistrarBusy (the reload must not refill it)", resp)
	}
	if p := rr.d.limiter.Params().Admission; p.Burst != 64 || p.RefillInterval.Milliseconds() != 1800000 {
		t.Fatalf("limiter admission sizes %+v, want 64 per 1800000 ms", p)
	}
	// A removed component stops being accepted.
	if resp := mintAs(t, rr.client, "edge-proxy", 0); resp.ErrorID != wire.ServiceInstanceMismatch {
		t.Fatalf("mint of the removed component: %+v, want ServiceInstanceMismatch (component_not_configured)", resp)
	}
	if got := rr.d.capacity.Last().ReserveBytes; got != 1048576 {
		rr.tick()
		if got = rr.d.capacity.Last().ReserveBytes; got != 1048576 {
			t.Fatalf("capacity reserve %d after the tick, want 1048576", got)
		}
	}
	if got := rr.metric(t, "registrar_config_last_reload_successful"); got != 1 {
		t.Fatalf("last_reload_successful %v, want 1", got)
	}
	if got := rr.metric(t, `registrar_config_reloads_total{result="success"}`); got != 1 {
		t.Fatalf("reloads success %v, want 1", got)
	}
	logs := rr.logs.String()
	if !strings.Contains(logs, `msg="configuration reloaded"`) || !strings.Contains(logs, `registrar.rate_limit_admission_burst="3 → 64"`) {
		t.Fatalf("no INFO line with the changed keys old → new in\n%s", logs)
	}
}

func TestReloadRefusesAnInvalidFileAndKeepsTheOldConfigurationWhole(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	for _, tc := range []struct {
		name string
		text func(dir string) string
		mode os.FileMode
		want string
	}{
		{"zero interval", func(dir string) string {
			return reloadFile(dir, "rate_limit_admission_burst = 64\nrate_limit_admission_refill_interval_ms = 0\n", twoComponents)
		}, 0o600, "registrar.rate_limit_admission_refill_interval_ms must be greater than 0"},
		{"group- and world-writable", func(dir string) string {
			return reloadFile(dir, "rate_limit_admission_burst = 64\n", twoComponents)
		}, 0o666, "writable"},
		{"misspelt key", func(dir string) string {
			return reloadFile(dir, "rate_limit_admission_burst = 64\nrate_limit_admision_burst = 64\n", twoComponents)
		}, 0o600, "registrar.rate_limit_admision_burst is not a known key"},
		{"restart-only key", func(dir string) string {
			return strings.Replace(reloadFile(dir, "rate_limit_admission_burst = 64\n", twoComponents), "maintenance_interval_ms = 3600000", "maintenance_interval_ms = 500", 1)
		}, 0o600, "registrar.maintenance_interval_ms changed: it needs a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := startFromFile(t)
			rr.write(t, tc.text(rr.dir), tc.mode)
			_, err := rr.d.Reload(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload: %v, want an error containing %q", err, tc.want)
			}
			if tc.name == "restart-only key" && !errors.Is(err, ErrRestartRequired) || tc.name != "restart-only key" && !errors.Is(err, ErrReloadInvalid) {
				t.Fatalf("Reload: %v, wrong sentinel", err)
			}
			// Nothing applied: the old burst (3), both components.
			if p := rr.d.limiter.Params().Admission; p.Burst != 3 {
				t.Fatalf("admission burst %d after a refused reload, want the old 3", p.Burst)
			}
			got := 0
			for i := range 5 {
				if mintAs(t, rr.client, "review", uint32(i+1)).OK() {
					got++
				}
			}
			if got != 3 {
				t.Fatalf("%d mints admitted after a refused reload, want the old burst 3", got)
			}
			if resp := mintAs(t, rr.client, "edge-proxy", 0); resp.ErrorID != wire.RegistrarBusy {
				t.Fatalf("edge-proxy after a refused reload: %+v, want it still configured (throttled, not refused)", resp)
			}
			if g := rr.metric(t, "registrar_config_last_reload_successful"); g != 0 {
				t.Fatalf("last_reload_successful %v, want 0", g)
			}
			if g := rr.metric(t, `registrar_config_reloads_total{result="failure"}`); g != 1 {
				t.Fatalf("reloads failure %v, want 1", g)
			}
			if !strings.Contains(rr.logs.String(), "configuration reload refused") {
				t.Fatalf("no refusal logged:\n%s", rr.logs.String())
			}
			// A good file afterwards applies and resets the gauge.
			rr.write(t, reloadFile(rr.dir, startLimits, twoComponents), 0o600)
			if _, err := rr.d.Reload(context.Background()); err != nil {
				t.Fatalf("Reload of the original file: %v", err)
			}
			if g := rr.metric(t, "registrar_config_last_reload_successful"); g != 1 {
				t.Fatalf("last_reload_successful %v after a good reload, want 1", g)
			}
		})
	}
}

func TestReloadOverTheSocketAndBySIGHUPShareThePath(t *testing.T) {
	rr := startFromFile(t)
	rr.write(t, reloadFile(rr.dir, strings.Replace(startLimits, "= 3\n", "= 5\n", 1), twoComponents), 0o600)
	res, err := rr.client.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || len(res.Changes) != 1 || res.Changes[0].Key != "registrar.rate_limit_admission_burst" || res.Changes[0].New != "5" {
		t.Fatalf("Reload over the socket = %+v", res)
	}
	if p := rr.d.limiter.Params().Admission; p.Burst != 5 {
		t.Fatalf("admission burst %d, want 5", p.Burst)
	}
	rr.write(t, strings.Replace(reloadFile(rr.dir, startLimits, twoComponents), "r.sock", "s.sock", 1), 0o600)
	res, err = rr.client.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied || len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0], "registrar.socket_path changed") {
		t.Fatalf("restart-only reload over the socket = %+v, want refused naming registrar.socket_path", res)
	}
	if p := rr.d.limiter.Params().Admission; p.Burst != 5 {
		t.Fatalf("admission burst %d after a refused reload, want 5 (nothing applied)", p.Burst)
	}
}

type tokenBackend struct {
	closingBackend
	err   error
	calls int
}

func (b *tokenBackend) RereadToken(context.Context) error { b.calls++; return b.err }

func TestReloadCallsTheBackendsTokenReread(t *testing.T) {
	b := &tokenBackend{err: errors.New("token file unreadable")}
	d := &Daemon{backend: b}
	if err := d.rereadToken(context.Background(), config.OpenBao{}); err == nil || b.calls != 1 {
		t.Fatalf("rereadToken = %v after %d calls, want the backend's error after 1", err, b.calls)
	}
	d.backend = struct{ closingBackend }{}
	if err := d.rereadToken(context.Background(), config.OpenBao{}); err != nil {
		t.Fatalf("a backend without a token re-read: %v", err)
	}
}

// hupOnServing sends this process SIGHUP from inside the log call of the
// "registrar-otel serving" line: the earliest a reader of the log could.
type hupOnServing struct{ slog.Handler }

func (h hupOnServing) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "registrar-otel serving" {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			return err
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h hupOnServing) WithAttrs(as []slog.Attr) slog.Handler {
	return hupOnServing{h.Handler.WithAttrs(as)}
}

func (h hupOnServing) WithGroup(g string) slog.Handler { return hupOnServing{h.Handler.WithGroup(g)} }

// TestASIGHUPAsSoonAsTheServingLineReloads: a SIGHUP sent while the
// serving line is being written reaches the reload. Were it caught only
// after that line, Go's default action for SIGHUP would end this test
// binary.
func TestASIGHUPAsSoonAsTheServingLineReloads(t *testing.T) {
	cfg := testConfig(t)
	hup := make(chan struct{}, 1)
	d, err := newDaemon(cfg, slog.New(hupOnServing{slog.NewTextHandler(io.Discard, nil)}), Options{}, seams{
		onSIGHUP: func(error) { hup <- struct{}{} },
		load:     func(string, []string, *slog.Logger) (config.Config, error) { return cfg, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-hup
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := d.reload.stats(); s.Successes != 1 {
		t.Fatalf("reload stats %+v, want the SIGHUP's one successful reload", s)
	}
}

// TestLimiterConfigKeepsUnixCallersInTheLocalPool: the unix socket's
// callers keep a pool of their own however the caller policies are
// configured (a policy sizes buckets; the transport picks the pool).
func TestLimiterConfigKeepsUnixCallersInTheLocalPool(t *testing.T) {
	for _, withPolicies := range []bool{false, true} {
		r := config.Default().Registrar
		if withPolicies {
			r.Callers = []config.CallerPolicy{{Name: "control-plane", Identities: []string{"unix-peer:uid=0"}, Sizes: r.DefaultSizes()}}
		}
		lc, err := limiterConfig(r)
		if err != nil {
			t.Fatal(err)
		}
		if lc.Local == nil || !lc.Local("unix-peer:uid=1000") || lc.Local("registrar-client:dns:h1") {
			t.Fatalf("policies %v: Local does not put exactly the unix callers in the local pool", withPolicies)
		}
		if withPolicies && (len(lc.Policies) != 1 || lc.Match == nil) {
			t.Fatalf("policies: %+v", lc.Policies)
		}
	}
}

func TestCallerPoliciesSeriesStartAtZeroAtStartAndOnReload(t *testing.T) {
	const ops = `[registrar.callers.ops]
identities = ["unix-peer:uid=4242"]
rate_limit_admission_burst = 40
[registrar.callers.ops.shadow]
rate_limit_admission_burst = 20
`
	rr := startFromFile(t)
	rr.write(t, reloadFile(rr.dir, startLimits, twoComponents+ops), 0o600)
	if _, err := rr.d.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	// Declared before any limited call: every verb and bucket at zero,
	// the shadow series too, for the shadowed policy only.
	for _, verb := range []string{"mint", "deregister"} {
		for _, name := range []string{"registrar_limited_admission_total", "registrar_limited_predecision_refusal_total"} {
			if got := rr.metric(t, name+`{policy="ops",verb="`+verb+`"}`); got != 0 {
				t.Fatalf("%s ops %s = %v, want 0", name, verb, got)
			}
		}
		for _, bucket := range []string{"admission", "predecision_refusal"} {
			if got := rr.metric(t, `registrar_shadow_limited_total{bucket="`+bucket+`",policy="ops",verb="`+verb+`"}`); got != 0 {
				t.Fatalf("shadow %s %s = %v, want 0", bucket, verb, got)
			}
		}
	}
	if _, ok, _ := rr.sample(t, `registrar_shadow_limited_total{bucket="admission",policy="default",verb="mint"}`); ok {
		t.Fatal("the default policy has no shadow sizes, yet has a shadow series")
	}

	// A daemon started with the policy declares it as well.
	dir := t.TempDir()
	path := filepath.Join(dir, "registrar.toml")
	if err := os.WriteFile(path, []byte(reloadFile(dir, startLimits, twoComponents+ops)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := startLogged(t, cfg, seams{})
	if got := fresh.metric(t, `registrar_limited_admission_total{policy="ops",verb="deregister"}`); got != 0 {
		t.Fatalf("at start: ops deregister admission %v, want 0", got)
	}
	if got := fresh.metric(t, `registrar_shadow_limited_total{bucket="predecision_refusal",policy="ops",verb="mint"}`); got != 0 {
		t.Fatalf("at start: ops shadow %v, want 0", got)
	}
}
