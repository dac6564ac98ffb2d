//go:build linux

package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// logBuffer is the shared test log destination.
type logBuffer = logtest.Buffer

// riskConfig is testConfig with a limiter that never gets in the way and
// the smallest audit files (64 KiB), so rotation is quick to reach.
func riskConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	r := &cfg.Registrar
	r.RateLimitAdmissionBurst = 100000
	r.RateLimitPredecisionRefusalBurst = 100000
	r.AuditMaxFileBytes = config.MinAuditMaxFileBytes
	return cfg
}

// startLogged starts a daemon with the seams s whose log goes to the
// returned buffer.
func startLogged(t *testing.T, cfg config.Config, s seams) (*running, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	return launch(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})), s), logs
}

func (r *running) mustMint(t *testing.T) *wire.Response {
	t.Helper()
	resp, err := r.client.Mint(context.Background(), mint("review"))
	if err != nil || !resp.OK() {
		t.Fatalf("mint: %+v, %v", resp, err)
	}
	return resp
}

// metric scrapes the daemon's /metrics handler for one sample's value.
func (r *running) metric(t *testing.T, sample string) float64 {
	t.Helper()
	v, ok, body := r.sample(t, sample)
	if !ok {
		t.Fatalf("no sample %s in\n%s", sample, body)
	}
	return v
}

// sample reads sample from the daemon's /metrics: its value, whether the
// exposition holds it, and the exposition.
func (r *running) sample(t *testing.T, sample string) (float64, bool, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.d.tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f, true, body
		}
	}
	return 0, false, body
}

func scanDir(t *testing.T, dir string) *audit.Report {
	t.Helper()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestDeletingTheAuditDirectoryWhileRunningReopensAFreshActiveFile(t *testing.T) {
	cfg := riskConfig(t)
	r, logs := startLogged(t, cfg, seams{})
	dir := cfg.Registrar.AuditRecordDir
	r.mustMint(t)
	before := r.metric(t, `registrar_audit_file_reopened_total{cause="directory_removed"}`)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	resp := r.mustMint(t)

	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the record directory was not re-created 0700: %v %v", fi, err)
	}
	rep := scanDir(t, dir)
	if rep.Anomalies() || rep.Records[audit.PhaseIntent-1] != 1 || rep.Records[audit.PhaseOutcome-1] != 1 {
		t.Fatalf("scan of the new directory: %+v, want clean with the next mint's intent and outcome", rep)
	}
	if got := strings.Join(rep.Files, ","); got != audit.ActiveFileName {
		t.Errorf("files read %q, want only the new active file", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if !bytes.Contains(b, []byte(`"request_id":"`+resp.RequestID+`"`)) {
		t.Errorf("the new active file does not hold request %s:\n%s", resp.RequestID, b)
	}
	if after := r.metric(t, `registrar_audit_file_reopened_total{cause="directory_removed"}`); after != before+1 {
		t.Errorf("registrar_audit_file_reopened_total{cause=directory_removed} went %v -> %v, want +1", before, after)
	}
	if got := logs.Lines("level=ERROR", "cause=directory_removed", "directory_recreated=true"); len(got) != 1 {
		t.Errorf("ERROR lines for the reopen: %q\nlog:\n%s", got, logs)
	}
}

func TestRenamingTheActiveFileSendsTheNextRecordsToANewOneAndScanListsIt(t *testing.T) {
	cfg := riskConfig(t)
	r, logs := startLogged(t, cfg, seams{})
	dir := cfg.Registrar.AuditRecordDir
	first := r.mustMint(t)
	renamed := filepath.Join(dir, audit.ActiveFileName+".1") // what a logrotate rule makes
	if err := os.Rename(filepath.Join(dir, audit.ActiveFileName), renamed); err != nil {
		t.Fatal(err)
	}
	second := r.mustMint(t)

	old, _ := os.ReadFile(renamed)
	cur, _ := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if !bytes.Contains(old, []byte(first.RequestID)) || bytes.Contains(old, []byte(second.RequestID)) {
		t.Errorf("renamed file holds the wrong records:\n%s", old)
	}
	if !bytes.Contains(cur, []byte(second.RequestID)) || bytes.Count(cur, []byte("\n")) != 2 {
		t.Errorf("new active file does not hold exactly the next mint's two records:\n%s", cur)
	}
	rep := scanDir(t, dir)
	found := false
	for _, s := range rep.Skipped {
		if s.Name == audit.ActiveFileName+".1" && strings.Contains(s.Reason, "unrecognised name") {
			found = true
		}
	}
	if !found {
		t.Errorf("scan does not list the renamed file as not read: skipped %+v", rep.Skipped)
	}
	if got := r.d.store.Stats().Reopens[audit.ReopenFileRenamed]; got != 1 {
		t.Errorf("renamed reopens %d, want 1", got)
	}
	if len(logs.Lines("level=ERROR", "cause=renamed")) != 1 {
		t.Errorf("no ERROR line for the rename:\n%s", logs)
	}
}

func TestSIGHUPReopensTheActiveFile(t *testing.T) {
	cfg := riskConfig(t)
	reopened := make(chan error, 1)
	r, logs := startLogged(t, cfg, seams{
		onSIGHUP: func(err error) { reopened <- err },
		// Configured in code: the reload SIGHUP also runs re-reads the same.
		load: func(string, []string, *slog.Logger) (config.Config, error) { return cfg, nil },
	})
	dir := cfg.Registrar.AuditRecordDir
	r.mustMint(t)
	// logrotate's convention: move the file away, then SIGHUP.
	if err := os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, "rotated-by-logrotate")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := <-reopened; err != nil {
		t.Fatalf("SIGHUP reopen: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, audit.ActiveFileName)); err != nil {
		t.Fatalf("no active file after SIGHUP: %v", err)
	}
	st := r.d.store.Stats()
	if st.Reopens[audit.ReopenSIGHUP] != 1 || st.Reopens[audit.ReopenFileRenamed] != 0 {
		t.Errorf("reopens %v, want one sighup and no detected rename", st.Reopens)
	}
	r.mustMint(t)
	if len(logs.Lines("level=ERROR")) != 0 {
		t.Errorf("an operator's SIGHUP logged at ERROR:\n%s", logs)
	}
	if len(logs.Lines("level=INFO", "cause=sighup")) != 1 {
		t.Errorf("no INFO line for the SIGHUP reopen:\n%s", logs)
	}
	if len(logs.Lines("level=INFO", `msg="configuration reloaded"`)) != 1 {
		t.Errorf("SIGHUP did not reload the configuration:\n%s", logs)
	}
}

// ---------------------------------------------------------------------------
// Real full and read-only file systems (root only).

func needRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to %s (CI runs as root); skipped as uid %d", what, os.Geteuid())
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted
// in cleanup (registered before anything started on it, so it runs last).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	needRoot(t, "mount a small tmpfs")
	dir, err := os.MkdirTemp("", "i11-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		os.Remove(dir)
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("root without CAP_SYS_ADMIN cannot mount a tmpfs here: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		os.Remove(dir)
	})
	return dir
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// fillTo grows filler until at most want bytes are free on its file system
// (want 0: until the file system is full).
func fillTo(t *testing.T, filler string, want uint64) {
	t.Helper()
	f, err := os.OpenFile(filler, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for range 1 << 16 { // bounded: 256 MiB at most
		free := freeBytes(t, filepath.Dir(filler))
		if free <= want {
			return
		}
		n := min(uint64(len(chunk)), free-want)
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) && want == 0 {
				return
			}
			t.Fatalf("filling: %v", err)
		}
	}
	t.Fatal("filler never reached its size")
}

func capacityOf(t *testing.T, resp *wire.Response) health.AuditCapacityMember {
	t.Helper()
	if len(resp.RawHealth) == 0 {
		t.Fatalf("response %d %s without registrar_health", resp.StatusCode, resp.ErrorID)
	}
	return resp.Health.AuditCapacity
}

func TestFullDiskWalksTheStatesAndRecoversWithoutARestart(t *testing.T) {
	const size = 4 << 20
	mnt := mountTmpfs(t, size)
	cfg := riskConfig(t)
	r := &cfg.Registrar
	r.AuditRecordDir = filepath.Join(mnt, "audit")
	r.AuditMaxRetainedFiles = 16                 // budget 17 × 64 KiB = 1088 KiB
	r.AuditStoreReserveBytes = 512 << 10         // ok needs 1088 KiB − store + 512 KiB
	filler := filepath.Join(mnt, "other-writer") // the OpenBao audit device, say
	run, logs := startLogged(t, cfg, seams{})
	ctx := context.Background()

	run.tick()
	if got := capacityOf(t, run.mustMint(t)); got.State != "ok" || got.BudgetBytes != 17*65536 {
		t.Fatalf("empty tmpfs: %+v, want ok with budget %d", got, 17*65536)
	}

	// Low: 1 MiB free, less than the 1.5 MiB ok needs, more than a file.
	fillTo(t, filler, 1<<20)
	run.tick()
	got := capacityOf(t, run.mustMint(t))
	if got.State != "low" || got.FreeBytes > 1<<20 || got.FreeBytes < 64<<10 {
		t.Fatalf("1 MiB free: %+v, want low", got)
	}

	// Critical: less than one 64 KiB file free; intents still fit.
	fillTo(t, filler, 32<<10)
	run.tick()
	if got := capacityOf(t, run.mustMint(t)); got.State != "critical" {
		t.Fatalf("32 KiB free: %+v, want critical", got)
	}

	// Unwritable: the disk is full; mints are refused AuditUnwritable.
	fillTo(t, filler, 0)
	var refused *wire.Response
	for range 64 { // the active file's last page may hold a few more lines
		resp, err := run.client.Mint(ctx, mint("review"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.OK() {
			refused = resp
			break
		}
	}
	if refused == nil || refused.ErrorID != wire.RegistrarUnavailable || refused.Reason != "AuditUnwritable" {
		t.Fatalf("on a full disk the mint answered %+v, want RegistrarUnavailable AuditUnwritable", refused)
	}
	run.tick()
	resp, err := run.client.Mint(ctx, mint("review"))
	if err != nil {
		t.Fatal(err)
	}
	if got := capacityOf(t, resp); got.State != "unwritable" || got.AppendFailures == 0 {
		t.Fatalf("after a refused mint and a tick: %+v, want unwritable with append failures", got)
	}
	if len(logs.Lines("level=ERROR", "audit append failed", "phase=intent")) == 0 {
		t.Errorf("no ERROR line for the failed intent:\n%s", logs)
	}

	// Free the space: mints succeed again, and the next tick says ok.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	run.mustMint(t)
	run.tick()
	if got := capacityOf(t, run.mustMint(t)); got.State != "ok" {
		t.Fatalf("after freeing the space: %+v, want ok", got)
	}
	rep := scanDir(t, r.AuditRecordDir)
	if rep.MalformedRecords != 0 {
		t.Errorf("the full disk left malformed lines: %+v", rep.Malformed)
	}
	for _, want := range [][]string{
		{"level=WARN", "from=ok to=low"},
		{"level=ERROR", "from=low to=critical"},
		{"level=ERROR", "from=critical to=unwritable"},
		{"level=INFO", "from=unwritable to=ok"},
	} {
		if got := logs.Lines(append(want, "audit store capacity state changed", "needed_bytes=")...); len(got) != 1 {
			t.Errorf("state-change lines %v: %q", want, got)
		}
	}
}

func TestTheServedCapacityMovesOnlyOnATick(t *testing.T) {
	mnt := mountTmpfs(t, 8<<20)
	cfg := riskConfig(t)
	cfg.Registrar.AuditRecordDir = filepath.Join(mnt, "audit")
	run, _ := startLogged(t, cfg, seams{})
	run.tick()
	before := capacityOf(t, run.mustMint(t))
	fillTo(t, filepath.Join(mnt, "filler"), 2<<20) // 6 MiB fewer free bytes
	h, err := run.client.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := capacityOf(t, h); got != before {
		t.Fatalf("free space moved without a tick and the served member changed: %+v, was %+v", got, before)
	}
	run.tick()
	after := capacityOf(t, run.mustMint(t))
	if after.FreeBytes >= before.FreeBytes-4<<20 {
		t.Fatalf("after the tick free_bytes %d, was %d: want about 6 MiB less", after.FreeBytes, before.FreeBytes)
	}
}

func TestAReadOnlyDirectoryAtRotationRefusesMintsWithOneErrorLine(t *testing.T) {
	cfg := riskConfig(t)
	run, logs := startLogged(t, cfg, seams{})
	dir := cfg.Registrar.AuditRecordDir
	active := filepath.Join(dir, audit.ActiveFileName)
	// Fill the active file to within one mint of its 64 KiB bound.
	for range 1000 {
		fi, err := os.Stat(active)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > config.MinAuditMaxFileBytes-1500 {
			break
		}
		run.mustMint(t)
	}
	makeReadOnly(t, dir)

	ctx := context.Background()
	refused := 0
	for range 40 {
		resp, err := run.client.Mint(ctx, mint("review"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.OK() {
			if resp.ErrorID != wire.RegistrarUnavailable || resp.Reason != "AuditUnwritable" {
				t.Fatalf("refused with %s %s, want RegistrarUnavailable AuditUnwritable", resp.ErrorID, resp.Reason)
			}
			refused++
		}
	}
	if refused < 38 {
		t.Fatalf("%d of 40 mints refused at a read-only rotation, want all but the last one that fit", refused)
	}
	lines := logs.Lines("level=ERROR")
	if len(lines) != 1 || !strings.Contains(lines[0], "step=rotate") || !strings.Contains(lines[0], "phase=intent") ||
		!(strings.Contains(lines[0], "read-only file system") || strings.Contains(lines[0], "permission denied")) {
		t.Fatalf("ERROR lines %q, want exactly one naming the rotation and its cause", lines)
	}
	run.tick()
	if h, _ := run.client.Health(ctx); capacityOf(t, h).State != "unwritable" {
		t.Errorf("state %+v after refused rotations, want unwritable", capacityOf(t, h))
	}
}

// makeReadOnly makes dir read-only until the test ends: as root (whom
// permissions do not stop) a read-only bind mount of dir on itself; as
// another user, mode 0500.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("root without CAP_SYS_ADMIN cannot make a read-only bind mount here: %v", err)
		}
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
}

// TestAFloodLeavesOneStoreFile lists the audit directory after a flood of
// both kinds (refusals and admissions past their bursts), a tick and the
// shutdown flush: the evidence is one store — the one active file, a
// regular file, no second file, no directory, no version or index file —
// and every line of it decodes as one record of the one encoding, the
// counted records among them.
func TestAFloodLeavesOneStoreFile(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	ctx := context.Background()
	for range 200 {
		r.client.Mint(ctx, mint("BAD"))
		r.client.Mint(ctx, mint("review"))
	}
	r.tick()
	r.stop(t)

	dir := cfg.Registrar.AuditRecordDir
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(ents) != 1 || ents[0].Name() != audit.ActiveFileName || !ents[0].Type().IsRegular() {
		t.Fatalf("audit directory after a flood holds %q, want exactly the regular file %q", names, audit.ActiveFileName)
	}
	b, err := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if err != nil {
		t.Fatal(err)
	}
	phases := map[audit.Phase]int{}
	for line := range bytes.Lines(b) {
		rec, err := audit.Unmarshal(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatalf("a line that is not a record of the store's encoding: %v: %q", err, line)
		}
		phases[rec.Phase]++
	}
	if phases[audit.PhaseLimited] == 0 || phases[audit.PhaseIntent] == 0 {
		t.Fatalf("records by phase %v: want the flood's counted records beside the intents", phases)
	}
}

// Issue 37: SIGABRT, systemd's watchdog signal, ends the daemon with
// AbortExitStatus (not Go's 2, which the unit keeps for configuration
// errors and never restarts), after an ERROR line and every goroutine's
// stack on stderr.
func TestSIGABRTDumpsTheStacksAndExitsForARestart(t *testing.T) {
	cfg := riskConfig(t)
	exited := make(chan int, 1)
	var stacks syncBuffer
	r, logs := startLogged(t, cfg, seams{
		exit:   func(code int) { exited <- code },
		stacks: &stacks,
	})
	r.mustMint(t)
	if err := syscall.Kill(os.Getpid(), syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != AbortExitStatus || code == 2 {
			t.Fatalf("exit status %d, want %d", code, AbortExitStatus)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGABRT")
	}
	if dump := stacks.String(); !strings.Contains(dump, "goroutine ") || !strings.Contains(dump, "daemon.(*Daemon).Run") {
		t.Errorf("the stack dump lacks the daemon's goroutines:\n%.2000s", dump)
	}
	if len(logs.Lines("level=ERROR", "SIGABRT", "exit_status=134")) != 1 {
		t.Errorf("no ERROR line for SIGABRT:\n%s", logs)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and a later reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
