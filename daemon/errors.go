package daemon

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/server"
)

// SetupError is a failure to start that a restart cannot fix: the
// configuration or the host is wrong (an unsafe or missing path, a file
// that is not a socket at the socket path, a port in use, a bad
// certificate, an unreadable token file, an unknown socket group, a
// handed-over listener that is not the configured socket). An operator
// must change something first, so `serve` exits 2 for it and the systemd
// unit's RestartPreventExitStatus=2 keeps systemd from restarting in a
// loop. Every other error of New and Run is a runtime failure (exit 1:
// a full disk, an I/O error, a listener failing while serving), which a
// restart may fix.
//
// Its text is Err's alone; match it with errors.As.
type SetupError struct {
	// Err is the error New returned, naming the component.
	Err error
}

func (e *SetupError) Error() string { return e.Err.Error() }

func (e *SetupError) Unwrap() error { return e.Err }

// IsSetupError reports whether err, or an error it wraps, is a
// *SetupError.
func IsSetupError(err error) bool {
	_, ok := errors.AsType[*SetupError](err)
	return ok
}

// setup classifies a failure of New. always is true for a step whose every
// failure comes from the configuration or the files it names (the
// telemetry configuration, the TLS certificate files, the token, the
// socket group); for the others the cause decides (permanentCause).
func setup(err error, always bool) error {
	if err == nil {
		return nil
	}
	if always || permanentCause(err) {
		return &SetupError{Err: err}
	}
	return err
}

// permanentCause reports whether err is a configuration or environment
// error that stays as long as nothing on the host changes.
func permanentCause(err error) bool {
	if _, ok := errors.AsType[*config.KeyError](err); ok {
		return true
	}
	for _, target := range []error{
		privdir.ErrUnsafe, audit.ErrUnsafeStore, embedded.ErrUnsafeState,
		server.ErrUnsafeDir, server.ErrNotSocket, server.ErrSocketInUse, server.ErrTLSFiles,
		fs.ErrNotExist, fs.ErrPermission,
		syscall.EADDRINUSE, syscall.EADDRNOTAVAIL, syscall.ENOTDIR, syscall.ELOOP,
		syscall.EROFS, syscall.ENAMETOOLONG, syscall.EISDIR,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
