package daemon

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
)

// seams are what a daemon takes from its process — the clock, the
// environment, the configuration loader, the service manager, the ticker —
// and two points where a test observes or stalls it. They are passed in
// once, to newDaemon, and never written afterwards: no test sets a field of
// a built daemon or a package variable, so the daemons of parallel tests
// share nothing. The zero value is the process's own (New).
type seams struct {
	// now is the daemon's clock: the recovery's instant and the liveness
	// probe's; nil means time.Now.
	now func() time.Time
	// environ is where the token's environment variables are read, at start
	// and by each reload; nil means os.Environ.
	environ func() []string
	// load reads the configuration on a reload; nil means config.Load.
	// A daemon configured in code has no file to read again.
	load func(path string, environ []string, logger *slog.Logger) (config.Config, error)
	// notify sends one sd_notify state; nil means systemdNotify.
	notify notifyFunc
	// watchdog, when above 0, stands for WATCHDOG_USEC.
	watchdog time.Duration
	// ticks are the maintenance tick's instants; nil means a ticker at
	// registrar.maintenance_interval_ms.
	ticks <-chan time.Time
	// beforeTick, when set, runs before each maintenance pass's tasks (a
	// stall).
	beforeTick func()
	// onSIGHUP, when set, is told the result of each SIGHUP reopen.
	onSIGHUP func(error)
	// exit ends the process after SIGABRT; nil means os.Exit.
	exit func(code int)
	// stacks is where SIGABRT's goroutine dump goes; nil means os.Stderr.
	stacks io.Writer
	// unfair serves every request at once, without the wire server's fair
	// dispatch (server.Options.DisableFairDispatch): the peer the fairness
	// benchmark measures the daemon against.
	unfair bool
}

// withDefaults returns s with the process's own for every seam left nil.
func (s seams) withDefaults() seams {
	if s.now == nil {
		s.now = time.Now
	}
	if s.environ == nil {
		s.environ = os.Environ
	}
	if s.load == nil {
		s.load = config.Load
	}
	if s.notify == nil {
		s.notify = systemdNotify
	}
	if s.exit == nil {
		s.exit = os.Exit
	}
	if s.stacks == nil {
		s.stacks = os.Stderr
	}
	return s
}
