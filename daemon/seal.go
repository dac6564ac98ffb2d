package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

// sealTick is the tick's sealing task: the audit store ends its sealing
// epoch once it has lasted audit.SealInterval (Store.SealTick; nothing on a
// store that is not sealed), then the chain's head is logged if it changed.
func (d *Daemon) sealTick(ctx context.Context, now time.Time) error {
	err := d.store.SealTick(now)
	d.logSealHead(ctx)
	if err != nil {
		return fmt.Errorf("daemon: audit sealing: %w", err)
	}
	return nil
}

// logSealHead logs the audit chain's head (audit.HeadMessage, its
// attributes audit.SealHead.HeadAttrs) when it changed since the last one
// logged. Under systemd the line goes to the journal, out of the daemon's
// uid's reach: `audit verify --heads` checks the store's tail against it.
// It is evidence, not a diagnostic, so it is handed to the handler
// whatever registrar.log_level says (the level is checked before Handle,
// never in it), at INFO.
func (d *Daemon) logSealHead(ctx context.Context) {
	h, ok := d.store.SealHead()
	if !ok || h == d.sealHead {
		return
	}
	d.sealHead = h
	r := slog.NewRecord(time.Now(), slog.LevelInfo, audit.HeadMessage, 0)
	r.AddAttrs(slog.String("component", "audit"))
	r.AddAttrs(h.HeadAttrs()...)
	if err := d.logger.Handler().Handle(ctx, r); err != nil {
		d.logger.LogAttrs(ctx, slog.LevelWarn, "logging the audit seal head failed", slog.Any("error", err))
	}
}
