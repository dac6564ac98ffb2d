package daemon

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/subid"
)

// subuids is registrar.subuid_file read, with the operators exempt: what
// the server identifies unix callers through, and what the log says of it.
type subuids struct {
	file string
	m    *subid.Map // nil: the mapping is off
	// left are the ranges Exempt kept apart from an operator.
	left []subid.Exemption
}

// loadSubuids reads cfg's registrar.subuid_file (config.LoadSubuids: the
// error is a *config.KeyError) and exempts the operators (operatorUIDs):
// a range one of them owns is left out, and none of them inside a range
// is mapped, so no subordinate uid is ever an operator.
func loadSubuids(cfg config.Config) (subuids, error) {
	m, err := cfg.LoadSubuids()
	if err != nil {
		return subuids{}, err
	}
	s := subuids{file: cfg.Registrar.SubuidFile}
	s.m, s.left = m.Exempt(operatorUIDs()...)
	return s, nil
}

// putSubuids puts s in force for the connections accepted from now on and
// logs it: one INFO line with the ranges' count, and a WARN line for each
// range left out or holding an operator and each range of a name no
// account has.
func (d *Daemon) putSubuids(ctx context.Context, s subuids) {
	d.server.SetSubordinateUIDs(s.m)
	if s.m == nil {
		return
	}
	log := d.logger.With("component", "config", "key", "registrar.subuid_file", "file", s.file)
	log.LogAttrs(ctx, slog.LevelInfo, "subordinate uid ranges read: a uid inside one is its owner's identity", slog.Int("ranges", s.m.Len()))
	for _, e := range s.left {
		attrs := []slog.Attr{slog.Int("line", e.Range.Line), slog.String("range", span(e.Range))}
		if e.Owned {
			log.LogAttrs(ctx, slog.LevelWarn, "subordinate uid range left out: its owner is an operator, whose identity is unrestricted; its uids stay themselves",
				append(attrs, slog.Uint64("owner", uint64(e.UID)))...)
			continue
		}
		if e.Range.Resolved {
			attrs = append(attrs, slog.Uint64("owner", uint64(e.Range.Owner)))
		} else {
			attrs = append(attrs, slog.String("name", e.Range.Name))
		}
		log.LogAttrs(ctx, slog.LevelWarn, "an operator's uid lies in a subordinate uid range: it stays the operator, not the range's owner",
			append(attrs, slog.Uint64("uid", uint64(e.UID)))...)
	}
	for _, r := range s.m.Unresolved() {
		log.LogAttrs(ctx, slog.LevelWarn, "subordinate uid range of a name no account has: its uids stay themselves until a reload finds the account",
			slog.Int("line", r.Line), slog.String("name", r.Name), slog.String("range", span(r)))
	}
}

// span is a range as the log spells it: first-last.
func span(r subid.Range) string {
	return strconv.FormatUint(uint64(r.First), 10) + "-" + strconv.FormatUint(uint64(r.Last), 10)
}
