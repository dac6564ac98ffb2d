package audittest

import (
	"context"

	"github.com/registrar-otel/registrar-otel/audit"
)

// AppendBatch appends each record as Append does and returns one error per
// record; it also counts itself in Batches, so a test can tell one batch
// from many appends.
func (m *AuditLog) AppendBatch(ctx context.Context, recs []*audit.Record) []error {
	if len(recs) == 0 {
		return nil
	}
	m.mu.Lock()
	m.batches++
	m.mu.Unlock()
	errs := make([]error, len(recs))
	for i, r := range recs {
		errs[i] = m.Append(ctx, r)
	}
	return errs
}

// Batches returns how many non-empty AppendBatch calls were made.
func (m *AuditLog) Batches() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.batches
}
