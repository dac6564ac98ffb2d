// Package audittest holds an in-memory audit log for tests: a
// registrar.AuditLog and coalesce.Appender that validates every record the
// way the store does and can be told to fail a phase. It is test support:
// production code never imports it (cmd/registrar-otel's deptest holds that).
package audittest

import (
	"context"
	"fmt"
	"sync"

	"github.com/registrar-otel/registrar-otel/audit"
)

// AuditLog is an in-memory registrar.AuditLog (and coalesce.Appender). It
// validates every record with audit.Marshal, as the store does, and can be
// told to fail a phase. Safe for concurrent use.
type AuditLog struct {
	// Discard keeps only a count and skips validation (benchmarks).
	Discard bool
	// OnAppend, if set, runs (under the log's lock) before a record is
	// kept, for ordering assertions.
	OnAppend func(r *audit.Record)

	mu      sync.Mutex
	records []audit.Record
	n       int
	fail    map[audit.Phase]error
	batches int
}

// Append validates and keeps r, or returns the error set for its phase.
func (m *AuditLog) Append(_ context.Context, r *audit.Record) error {
	if !m.Discard {
		if _, err := audit.Marshal(r); err != nil {
			return fmt.Errorf("audittest.AuditLog: invalid record: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.OnAppend != nil {
		m.OnAppend(r)
	}
	if err := m.fail[r.Phase]; err != nil {
		return err
	}
	m.n++
	if !m.Discard {
		m.records = append(m.records, *r)
	}
	return nil
}

// FailPhase makes every later append of phase p return err (nil clears it).
func (m *AuditLog) FailPhase(p audit.Phase, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail == nil {
		m.fail = map[audit.Phase]error{}
	}
	m.fail[p] = err
}

// Records returns a copy of the records kept, in append order.
func (m *AuditLog) Records() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.records...)
}

// Count returns how many kept records have phase p.
func (m *AuditLog) Count(p audit.Phase) int {
	n := 0
	for _, r := range m.Records() {
		if r.Phase == p {
			n++
		}
	}
	return n
}

// Len returns how many appends succeeded (Discard included).
func (m *AuditLog) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}
