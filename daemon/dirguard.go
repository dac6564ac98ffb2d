package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// The private directories the guard holds, indexed like
// telemetry.Directories.
const (
	guardAudit = iota
	guardState
	guardSocket
	numGuarded
)

// guardedDir is one private directory the guard rechecks.
type guardedDir struct {
	key  string // the configuration key naming it
	path string
	what string // how the log line names it
	// check applies the owner and mode rules to the open directory by
	// fstat on its descriptor; it returns an error matching ErrUnsafe or
	// audit.ErrUnsafeStore when the directory breaks one, nil when it
	// passes, or another error when the check itself failed.
	check func() error
}

// dirGuard rechecks, on every tick, the three directories the evidence and
// the callers depend on — the audit record directory, registrar.state_dir
// and the socket's directory — through the descriptors the daemon holds
// open, never by path: the directory judged is the one the daemon writes
// in, whatever the path names now. At start each was refused unless it and
// every ancestor were owned by root or the daemon's uid and not group- or
// world-writable (privdir's owner and ancestor rules); the tick rechecks
// the owner and mode rules (the ancestor rule walks paths and is start's
// only).
//
// While any of them breaks a rule, every append is refused (answered
// AuditUnwritable, counted as an append failure, the store unwritable), an
// ERROR line names the directory (at most once a minute per directory) and
// registrar_directory_unsafe is 1 for it. Once it is put right (chmod 0700,
// chown back) appends resume — the record directory's at the next append,
// the others' at the next tick, which logs it at INFO: nothing needs a
// restart.
// What another uid did to the directory meanwhile stays for `audit scan`
// to report (files of a wrong owner or mode).
//
// Its methods run on the tick goroutine; stats is safe from the collector.
type dirGuard struct {
	dirs   [numGuarded]guardedDir
	unsafe [numGuarded]atomic.Bool
	store  *audit.Store
	log    *logthrottle.Throttle
	logger *slog.Logger
}

// openDirGuard builds the guard once every directory is open: the store's
// record directory, the checkpoint's state directory, and the socket's
// directory, opened here (it was checked by path when the socket was bound,
// or not at all when systemd bound it) and held until Close. The socket's
// directory is refused at start like the others: exit 2, naming the key.
func (d *Daemon) openDirGuard() (*dirGuard, error) {
	r := d.cfg.Registrar
	g := &dirGuard{store: d.store, log: logthrottle.New(d.logger, time.Minute, nil), logger: d.logger}
	g.dirs[guardAudit] = guardedDir{"registrar.audit_record_dir", r.AuditRecordDir, "audit record directory", func() error {
		if err := d.store.CheckDir(); !errors.Is(err, audit.ErrClosed) {
			return err
		}
		return nil
	}}
	g.dirs[guardState] = guardedDir{"registrar.state_dir", r.StateDir, "state directory", func() error {
		return privdir.Recheck(d.stateDir, r.StateDir, stateDirRules)
	}}
	sockDir := filepath.Dir(r.SocketPath)
	sd, _, err := privdir.Open(sockDir, socketDirRules)
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: socket directory (registrar.socket_path %s): %w", r.SocketPath, err), false)
	}
	d.closers = append(d.closers, sd.Close)
	g.dirs[guardSocket] = guardedDir{"registrar.socket_path", sockDir, "socket directory", func() error {
		return privdir.Recheck(sd, sockDir, socketDirRules)
	}}
	if err := telemetry.RegisterDirectories(d.tel.MeterProvider(), g.stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	return g, nil
}

// socketDirRules are the socket directory's rules, wire's: the owner rule
// and the ancestors. Group traversal (0750 for registrar.socket_group) is
// allowed; group or world write is not.
var socketDirRules = privdir.Options{Owner: true, Ancestors: true}

// unsafeDir reports whether err is a broken rule rather than a failed check.
func unsafeDir(err error) bool {
	return errors.Is(err, privdir.ErrUnsafe) || errors.Is(err, audit.ErrUnsafeStore)
}

// Tick is the tick task: recheck each directory, hold or release the
// store, then publish the gauge and log, in that order, so a gauge at 0 is
// never read while the store still refuses. A check that fails for another
// reason (an fstat error) is returned, logged by the tick loop, and changes
// nothing.
//
// The record directory needs no hold of its own: every append rechecks it
// first (audit.Store.CheckDir, failing closed and recovering on the first
// append after it is put right), and CheckDir marks the store unwritable, so
// the tick's call shows it at once. The state and socket directories are
// not on the append path: while either is unsafe the guard holds the store
// (audit.Store.Refuse) until the tick finds it private again.
func (g *dirGuard) Tick(ctx context.Context, _ time.Time) error {
	var errs [numGuarded]error
	var holds, failures []error
	for i := range g.dirs {
		dir := &g.dirs[i]
		if dir.check == nil {
			continue
		}
		errs[i] = dir.check()
		switch {
		case unsafeDir(errs[i]) && i != guardAudit:
			holds = append(holds, fmt.Errorf("%s %s is no longer private: %w", dir.key, dir.path, errs[i]))
		case errs[i] != nil && !unsafeDir(errs[i]):
			failures = append(failures, fmt.Errorf("%s %s: %w", dir.key, dir.path, errs[i]))
		}
	}
	if len(holds) > 0 {
		g.store.Refuse(errors.Join(holds...))
	} else if len(failures) == 0 {
		g.store.Refuse(nil)
	}
	for i := range g.dirs {
		dir := &g.dirs[i]
		switch err := errs[i]; {
		case dir.check == nil, err != nil && !unsafeDir(err):
		case err != nil:
			g.unsafe[i].Store(true)
			g.log.Log(ctx, "directory unsafe "+dir.key, slog.LevelError,
				dir.what+" is no longer private: appends fail until it is put right",
				slog.String(dir.key, dir.path), slog.String("directory", telemetry.Directories[i]), slog.Any("error", err))
		case g.unsafe[i].Swap(false):
			g.logger.LogAttrs(ctx, slog.LevelInfo, dir.what+" is private again",
				slog.String(dir.key, dir.path), slog.String("directory", telemetry.Directories[i]))
		}
	}
	return errors.Join(failures...)
}

// stats is the telemetry view.
func (g *dirGuard) stats() telemetry.DirectoryStats {
	var s telemetry.DirectoryStats
	for i := range g.unsafe {
		s.Unsafe[i] = g.unsafe[i].Load()
	}
	return s
}
