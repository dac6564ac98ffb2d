package daemon

import (
	"context"
	"log/slog"
	"time"
)

// reachability is the openbao backend's view of its cluster, for the
// readiness probe: Ready answers nil while the backend reaches an active
// node (or has failed to for less than openbao.readiness_grace_ms), else
// an error saying since when and why; Probe asks the cluster in the
// background when no request did lately. The embedded backend has none:
// its registry is a local file.
type reachability interface {
	Ready(now time.Time) error
	Probe(now time.Time)
}

// backendReady is the backend's part of /readyz: a balancer in front of
// several registrars routes around one that cannot reach the cluster.
func (d *Daemon) backendReady(now time.Time) error {
	if r, ok := d.backend.(reachability); ok {
		return r.Ready(now)
	}
	return nil
}

// probeBackend is the tick's reachability task: it keeps the backend's
// view fresh while no caller mints (Probe returns at once; the request, if
// any, runs in the background, so a hanging cluster never holds the tick
// and its watchdog), and logs each change of readiness once: not ready at
// WARN with the reason, ready again at INFO.
func (d *Daemon) probeBackend(ctx context.Context, now time.Time) error {
	r, ok := d.backend.(reachability)
	if !ok {
		return nil
	}
	r.Probe(now)
	reason := ""
	if err := r.Ready(now); err != nil {
		reason = err.Error()
	}
	switch {
	case reason != "" && d.backendUnready == "":
		d.logger.LogAttrs(ctx, slog.LevelWarn, "not ready: the openbao cluster is unreachable; /readyz answers 503", slog.String("reason", reason))
	case reason == "" && d.backendUnready != "":
		d.logger.LogAttrs(ctx, slog.LevelInfo, "ready again: the openbao cluster answers", slog.String("was", d.backendUnready))
	}
	d.backendUnready = reason
	return nil
}
