package audit

import (
	"context"
	"time"
)

// LateLimitedAfter is how far a limited record's write instant (ts) may
// trail its window_end before Scan reports it as late. A record the
// daemon's tick closes is written within one tick of its deadline
// (registrar.maintenance_interval_ms, 1 s by default); one recovered from
// the evidence checkpoint after an unclean stop has window_end at the
// checkpoint's instant and ts at the restart, so the interval between is
// where limited invocations may have gone uncounted. The store's records
// carry no mark of recovery (they keep the counted record's field set), so
// this is what the scan can see: a restart quicker than LateLimitedAfter
// leaves no visible gap here, and the daemon's ERROR line, its
// registrar_unclean_restarts_total and its registrar_health restart member
// are the exact account.
const LateLimitedAfter = 10 * time.Second

// EvidenceGap is an interval the store's counted records cannot vouch for:
// the late limited records sharing one window_end (a checkpoint's instant),
// From being that window_end and To the latest of their write instants (the
// restart that recovered them).
type EvidenceGap struct {
	File    string // the file of the first record of the gap
	Line    uint64 // its line, 1-based
	From    time.Time
	To      time.Time
	Records uint64
	Count   uint64 // the sum of their counts
}

// noteLate adds r to the report's gaps if it is late.
func (sc *scanner) noteLate(name string, lineNo uint64, r *Record) {
	if r.TS.Sub(r.WindowEnd) <= LateLimitedAfter {
		return
	}
	rep := sc.rep
	rep.LateLimitedRecords++
	for i := range rep.Gaps {
		g := &rep.Gaps[i]
		if g.From.Equal(r.WindowEnd) {
			g.Records++
			g.Count = addSat(g.Count, r.Count)
			if r.TS.After(g.To) {
				g.To = r.TS
			}
			return
		}
	}
	if len(rep.Gaps) < MaxReportedLines {
		rep.Gaps = append(rep.Gaps, EvidenceGap{File: name, Line: lineNo, From: r.WindowEnd, To: r.TS, Records: 1, Count: r.Count})
	}
}

// LimitedSince returns the limited records of the store in dir written at or
// after since, oldest first, reading it as Scan does (read-only, no symlink
// followed, rotated generations older than since skipped). Lines that do not
// decode are left to Scan to report. The daemon's recovery uses it to learn
// which checkpointed windows already have their record.
func LimitedSince(ctx context.Context, dir string, since time.Time) ([]*Record, error) {
	var out []*Record
	const span = time.Hour
	_, err := scan(ctx, ScanOptions{Dir: dir, Now: since.Add(span), Window: span}, func(sc *scanner) {
		sc.refLine = func(_ string, _ uint64, chunk []byte) {
			r, err := Unmarshal(chunk)
			if err == nil && r.Phase == PhaseLimited && !r.TS.Before(since) {
				out = append(out, r)
			}
		}
		sc.refFinish = func() {}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
