package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

var backupUsage = usageSpec{
	name:     "backup",
	synopsis: "--out FILE [--config FILE | --socket PATH] [--timeout D]",
	what: `Writes a consistent snapshot of the embedded registry (registrar.db) to FILE,
mode 0600, fsynced, replacing FILE only once the snapshot is complete.

With the daemon running, the snapshot comes from it over its unix socket (one
bbolt read transaction: mints go on meanwhile); only the daemon's own uid or
root may ask, anyone else is refused with AdminForbidden. With the daemon
stopped (no socket, or a socket that refuses connections), the file in
registrar.state_dir is copied directly, under the same kind of read
transaction. To restore: stop the daemon, put the file in place as
registrar.state_dir/registrar.db (owner the daemon's user, mode 0600), start.

Exit status: 0 written, 1 refused (AdminForbidden, an openbao backend) or the
snapshot failed, 2 usage or configuration error, 3 no protocol answer from
the socket.`,
	examples: []string{
		"registrar-otel backup --config /etc/registrar-otel/registrar.toml --out /var/backups/registrar-$(date +%F).db",
	},
}

// runBackup implements "registrar-otel backup".
func runBackup(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("backup")
	out := fs.String("out", "", "write the snapshot to this `file` (required)")
	cfgPath := fs.String("config", "", "the daemon's configuration `file`: its registrar.socket_path and registrar.state_dir (default: the embedded defaults)")
	socket := fs.String("socket", "", "the daemon's unix socket `path` (default: registrar.socket_path of --config)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on the snapshot after this long")
	if code, ok := parseFlags(fs, backupUsage, args, stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		return usageError(stderr, "backup", "--out FILE is required")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg, err := config.Load(*cfgPath, os.Environ(), logger)
	if err != nil {
		fmt.Fprint(stderr, "registrar-otel backup: ")
		printErrors(stderr, err)
		return exitUsage
	}
	if cfg.Registrar.Backend == config.BackendOpenBao {
		fmt.Fprintln(stderr, "registrar-otel backup: registrar.backend is openbao: the registry lives in OpenBao; back up the OpenBao server (its own snapshot) instead")
		return exitFailure
	}
	fromDefault := *socket == "" && *cfgPath == ""
	if *socket == "" {
		*socket = cfg.Registrar.SocketPath
	}
	cl, err := unixClient(*socket, *cfgPath, fromDefault, stderr, wire.WithTimeout(*timeout))
	if err != nil {
		fmt.Fprint(stderr, "registrar-otel backup: ")
		printErrors(stderr, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	from := "the running daemon at " + *socket
	n, err := writeSnapshot(*out, func(w io.Writer) (int64, error) { return cl.Backup(ctx, w) })
	if daemonStopped(err) {
		from = "the state database in " + cfg.Registrar.StateDir + " (the daemon is not running)"
		n, err = writeSnapshot(*out, func(w io.Writer) (int64, error) {
			return embedded.BackupFile(cfg.Registrar.StateDir, w, embedded.DefaultOpenTimeout)
		})
	}
	if err != nil {
		var ae *wire.AdminError
		var op *net.OpError
		switch {
		case errors.As(err, &ae):
			fmt.Fprintf(stderr, "registrar-otel backup: %s (HTTP %d)\n", ae.Error(), ae.StatusCode)
			if ae.ID == wire.AdminForbidden {
				fmt.Fprintln(stderr, "  run it as the daemon's user (sudo -u registrar-otel registrar-otel backup ...) or as root")
			}
			return exitFailure
		case errors.As(err, &op) && op.Op == "dial", errors.As(err, new(*wire.ServerNotTrustedError)):
			return transportError(stderr, "backup", daemonAddr{socket: *socket, fromConfig: *cfgPath}, err)
		}
		fmt.Fprintf(stderr, "registrar-otel backup: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "backup: %d bytes written to %s (mode 0600), from %s\n", n, *out, from)
	return exitOK
}

// daemonStopped reports whether err says nothing serves the socket: no
// such file, or a stale socket that refuses connections.
func daemonStopped(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED))
}

// writeSnapshot writes what fill writes to a temporary file beside out
// (mode 0600, never following a symlink), fsyncs it, renames it over out
// and fsyncs the directory: out is either the old file or the complete
// snapshot. On failure the temporary file is removed.
func writeSnapshot(out string, fill func(io.Writer) (int64, error)) (int64, error) {
	dir := filepath.Dir(out)
	f, err := os.CreateTemp(dir, "."+filepath.Base(out)+".partial-*")
	if err != nil {
		return 0, fmt.Errorf("--out %s: %w", out, err)
	}
	tmp := f.Name()
	fail := func(n int64, err error) (int64, error) {
		f.Close()
		os.Remove(tmp)
		return n, err
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(0, fmt.Errorf("--out %s: %w", out, err))
	}
	n, err := fill(f)
	if err != nil {
		return fail(n, err)
	}
	if err := f.Sync(); err != nil {
		return fail(n, fmt.Errorf("--out %s: fsync: %w", out, err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("--out %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("--out %s: %w", out, err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return n, fmt.Errorf("--out %s: fsync of %s: %w", out, dir, err)
		}
	}
	return n, nil
}
