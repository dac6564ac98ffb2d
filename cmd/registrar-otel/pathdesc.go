package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/registrar-otel/registrar-otel/config"
)

// describePath spells a path for a message: absolute, and, when it was
// given relative, saying so and against which directory, since the
// embedded defaults (var/run, var/lib, var/audit) are relative to the
// working directory and mean nothing from another one. fromDefault says
// the path is the embedded default rather than one the operator gave.
func describePath(p string, fromDefault bool) string {
	if filepath.IsAbs(p) {
		if fromDefault {
			return p + " (the default)"
		}
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		if fromDefault {
			return p + " (the default, relative to the working directory)"
		}
		return p + " (relative to the working directory)"
	}
	abs := filepath.Join(wd, p)
	if fromDefault {
		return abs + " (the default " + p + ", relative to the working directory " + wd + ")"
	}
	return abs + " (" + p + ", relative to the working directory " + wd + ")"
}

// loadConfig is config.Load with the --config path checked first for what
// the loader's own checks would word as something else: a directory given
// for the file (a world-writable /tmp would otherwise be refused as
// group- or world-writable).
func loadConfig(path string, environ []string, logger *slog.Logger) (config.Config, error) {
	return loadConfigFor(path, environ, logger, uint32(os.Geteuid()))
}

// loadConfigFor is loadConfig with the file's owner rule judged for the
// user uid (config.LoadFor): config check's, for the user serve runs as.
func loadConfigFor(path string, environ []string, logger *slog.Logger, uid uint32) (config.Config, error) {
	if path != "" {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return config.Config{}, fmt.Errorf("--config %s is a directory: give the configuration file itself (for example %s)",
				describePath(path, false), filepath.Join(path, "registrar.toml"))
		}
	}
	return config.LoadFor(path, environ, logger, uid)
}
