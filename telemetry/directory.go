package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The private directories' instrument: whether a directory the evidence
// depends on is still private (daemon/dirguard.go).
const (
	// registrar_directory_unsafe{directory="audit"|"state"|"socket"}
	DirectoryUnsafe = "registrar.directory.unsafe"
)

// Directories are the values of the directory label of
// registrar_directory_unsafe, in the order of DirectoryStats: the audit
// record directory, registrar.state_dir and the socket's directory. Every
// one is exported from the start.
var Directories = [3]string{"audit", "state", "socket"}

// DirectoryStats is what RegisterDirectories observes: Unsafe[i] is true
// while the directory Directories[i] fails its owner or mode rule on the
// open descriptor.
type DirectoryStats struct {
	Unsafe [3]bool
}

// RegisterDirectories registers, on mp (nil means a no-op provider):
//
//   - registrar.directory.unsafe (gauge, 0 or 1, label directory): 1 while
//     the directory, rechecked on every tick through the descriptor the
//     daemon holds open, is owned by neither root nor the daemon's uid or is
//     group- or world-writable; every append is refused meanwhile
//     (AuditUnwritable), so RegistrarAuditStoreCritical and
//     RegistrarAuditAppendFailing fire too.
//
// stats is called once per collection and must be safe from the collecting
// goroutine.
func RegisterDirectories(mp metric.MeterProvider, stats func() DirectoryStats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterDirectories: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterDirectories")
	// No unit: "1" would make the exporter append _ratio to the name.
	g := r.gauge(DirectoryUnsafe, "",
		"Whether a private directory is unsafe now: 1 while the audit record directory (audit), registrar.state_dir (state) or the socket's directory (socket), "+
			"rechecked on every tick through the descriptor the daemon holds, is owned by neither root nor the daemon's uid or is group- or world-writable; "+
			"every append is refused meanwhile. 0 when it is private.")
	var sets [len(Directories)][]metric.ObserveOption
	for i, d := range Directories {
		sets[i] = attrs(attribute.String("directory", d))
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		for i, unsafe := range stats().Unsafe {
			o.ObserveInt64(g, oneIf(unsafe), sets[i]...)
		}
		return nil
	})
}
