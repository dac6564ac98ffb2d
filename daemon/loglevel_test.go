package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// levelRig is a daemon started from a file whose [registrar] table sets
// log_level, logging to logs through a handler at level lv (serve's
// shape) or, with lv nil, through a handler that writes everything.
type levelRig struct {
	*running
	logs *logBuffer
	path string
	dir  string
	lv   *slog.LevelVar
}

func startAtLevel(t *testing.T, level string, lv *slog.LevelVar, fixed bool) *levelRig {
	t.Helper()
	dir, err := os.MkdirTemp("", "lvl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lr := &levelRig{dir: dir, path: filepath.Join(dir, "registrar.toml"), logs: &logBuffer{}, lv: lv}
	lr.setLevel(t, level)
	cfg, err := config.Load(lr.path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var handlerLevel slog.Leveler = slog.LevelDebug
	if lv != nil {
		handlerLevel = lv
	}
	d, err := NewWithOptions(cfg, slog.New(slog.NewTextHandler(lr.logs, &slog.HandlerOptions{Level: handlerLevel})),
		Options{LogLevel: lv, LogLevelFixed: fixed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lr.running = &running{d: d, client: wire.NewUnixClient(cfg.Registrar.SocketPath), cancel: cancel, done: make(chan error, 1)}
	go func() { lr.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-lr.done
	})
	return lr
}

// setLevel writes the file with log_level = level.
func (lr *levelRig) setLevel(t *testing.T, level string) {
	t.Helper()
	text := reloadFile(lr.dir, startLimits+"log_level = \""+level+"\"\n", twoComponents)
	if err := os.WriteFile(lr.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// malformed sends a request to an unknown path, which the wire server
// answers RequestMalformed and logs at debug level ("request malformed"),
// and returns how many such lines the log holds once it is answered.
func (lr *levelRig) malformed(t *testing.T) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", lr.d.cfg.Registrar.SocketPath)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://registrar/v1/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /v1/nowhere: %d, want a RequestMalformed refusal", resp.StatusCode)
	}
	return strings.Count(lr.logs.String(), `msg="request malformed"`)
}

func TestReloadChangesTheLogLevelInPlace(t *testing.T) {
	lv := new(slog.LevelVar)
	lr := startAtLevel(t, "info", lv, false)
	if n := lr.malformed(t); n != 0 {
		t.Fatalf("%d debug lines at log_level info, want 0", n)
	}
	lr.setLevel(t, "debug")
	changes, err := lr.d.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0] != (config.Change{Key: "registrar.log_level", Old: "info", New: "debug", Live: true}) {
		t.Fatalf("changes %+v, want registrar.log_level info → debug", changes)
	}
	if lv.Level() != slog.LevelDebug {
		t.Fatalf("handler level %v after the reload, want DEBUG", lv.Level())
	}
	if n := lr.malformed(t); n != 1 {
		t.Fatalf("%d debug lines after the reload to debug, want 1:\n%s", n, lr.logs)
	}
	if !strings.Contains(lr.logs.String(), `registrar.log_level="info → debug"`) {
		t.Fatalf("the reload INFO line does not list registrar.log_level info → debug:\n%s", lr.logs)
	}

	// An invalid level is refused naming the key, and the old level stays.
	lr.setLevel(t, "loud")
	if _, err := lr.d.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), `registrar.log_level must be one of "debug", "info", "warn", "error", got "loud"`) {
		t.Fatalf("reload with log_level \"loud\": %v, want refused naming registrar.log_level", err)
	}
	if n := lr.malformed(t); n != 2 || lv.Level() != slog.LevelDebug {
		t.Fatalf("after the refused reload: level %v, %d debug lines; want DEBUG kept, 2 lines", lv.Level(), n)
	}

	// Quieter: the reload line announcing it is still written (at the
	// more verbose of the two), then the debug lines stop.
	lr.setLevel(t, "ERROR")
	if _, err := lr.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lr.logs.String(), `registrar.log_level="debug → error"`) {
		t.Fatalf("the reload to error is not announced:\n%s", lr.logs)
	}
	if n := lr.malformed(t); n != 2 {
		t.Fatalf("%d debug lines at log_level error, want still 2", n)
	}
	// Louder from error, where the old level would hide an INFO line: the
	// reload line is still written.
	lr.setLevel(t, "info")
	if _, err := lr.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lr.logs.String(), `registrar.log_level="error → info"`) {
		t.Fatalf("the reload from error to info is not announced:\n%s", lr.logs)
	}
}

// TestTheDaemonFiltersByTheKeyWithoutALevelVar: New without Options, over a
// handler that writes everything, still follows registrar.log_level.
func TestTheDaemonFiltersByTheKeyWithoutALevelVar(t *testing.T) {
	lr := startAtLevel(t, "info", nil, false)
	if n := lr.malformed(t); n != 0 {
		t.Fatalf("%d debug lines at log_level info, want 0", n)
	}
	lr.setLevel(t, "debug")
	if _, err := lr.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := lr.malformed(t); n != 1 {
		t.Fatalf("%d debug lines after the reload to debug, want 1", n)
	}
}

// TestAFixedLevelOutlivesTheKey: serve --log-level given (LogLevelFixed)
// wins over the file at start and on every reload, which says so.
func TestAFixedLevelOutlivesTheKey(t *testing.T) {
	lv := new(slog.LevelVar) // info, as --log-level info sets it
	lr := startAtLevel(t, "debug", lv, true)
	if n := lr.malformed(t); n != 0 || lv.Level() != slog.LevelInfo {
		t.Fatalf("flag info, file debug: level %v, %d debug lines; want INFO, none", lv.Level(), n)
	}
	lr.setLevel(t, "error")
	changes, err := lr.d.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 || lv.Level() != slog.LevelInfo {
		t.Fatalf("reload with the flag given: changes %+v, level %v; want none, INFO", changes, lv.Level())
	}
	if !strings.Contains(lr.logs.String(), "registrar.log_level not applied: serve --log-level fixes the level") ||
		!strings.Contains(lr.logs.String(), "registrar.log_level=error log_level=info") {
		t.Fatalf("the ignored key is not reported:\n%s", lr.logs)
	}
}
