package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/registrar-otel/registrar-otel/wire"
)

// errRelativeAsRoot: root does not use a relative default socket path. In
// a directory another user controls, that user's process would be the
// "daemon" root talks to (and, for backup, whose snapshot root writes).
var errRelativeAsRoot = errors.New("the default socket path is relative to this directory, and root does not trust a socket it finds by a relative path")

// unixClient is a client command's client of the daemon's socket. The
// server must run as root or as the daemon's user: the owner of
// registrar.state_dir when --config (cfgPath) names the configuration and
// the directory exists, else the owner of the socket's directory (the
// wire client's default). fromDefault: socket is the embedded default,
// which root may not use when it is relative (errRelativeAsRoot, with the
// way out).
func unixClient(socket, cfgPath string, fromDefault bool, stderr io.Writer, opts ...wire.ClientOption) (*wire.Client, error) {
	if fromDefault && !filepath.IsAbs(socket) && os.Geteuid() == 0 {
		return nil, fmt.Errorf("%w (%s)\n  name the daemon's configuration with --config FILE, or its socket by an absolute --socket PATH", errRelativeAsRoot, socket)
	}
	if cfgPath != "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := loadConfig(cfgPath, os.Environ(), logger)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(cfg.Registrar.StateDir); err == nil {
			if owner, ok := wire.FileOwner(fi); ok {
				opts = append(opts, wire.WithServerUIDs(owner))
			}
		}
	}
	return wire.NewUnixClient(socket, opts...), nil
}
