package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
)

// DefaultReserveBytes is the default of registrar.audit_store_reserve_bytes
// (256 MiB): free space kept beyond what the store may still grow to, for
// the other writers of the same file system (the OpenBao audit device,
// logs) once the store has reached its own bound.
const DefaultReserveBytes = 256 << 20

// CapacityState is the audit store's capacity state, worst last. Its String
// is the spelling of registrar_health.audit_capacity.state and of the
// state label of registrar_audit_store_state.
type CapacityState uint8

// The five states. With free the file system's free bytes, store the
// store's bytes, budget = (audit_max_retained_files + 1) ×
// audit_max_file_bytes and reserve = audit_store_reserve_bytes, the state is
// the first that holds of:
//
//	unwritable      the last append (or reopen of the active file) failed
//	retention_held  retention keeps generations younger than
//	                audit_min_retention_seconds past audit_max_retained_files
//	critical        free < audit_max_file_bytes
//	low             free < max(budget − store, 0) + reserve
//	ok              otherwise
const (
	// CapacityOK: free space covers what the store may still grow to
	// before rotation bounds it, plus the reserve.
	CapacityOK CapacityState = iota
	// CapacityLow: it does not: the disk may fill before the store's own
	// bound does.
	CapacityLow
	// CapacityCritical: less than one file's worth (audit_max_file_bytes)
	// is free: intents will soon fail.
	CapacityCritical
	// CapacityRetentionHeld: the store keeps more generations than its
	// budget because the oldest is younger than
	// audit_min_retention_seconds: mints are being refused RegistrarBusy
	// now, until it ages out (the operator chose evidence over service).
	CapacityRetentionHeld
	// CapacityUnwritable: the last append or reopen failed: invocations are
	// being refused AuditUnwritable now.
	CapacityUnwritable

	// NumCapacityStates is the number of states, for arrays indexed by
	// state.
	NumCapacityStates = int(CapacityUnwritable) + 1
)

var capacityStateNames = [NumCapacityStates]string{"ok", "low", "critical", "retention_held", "unwritable"}

// String returns "ok", "low", "critical", "retention_held" or
// "unwritable".
func (s CapacityState) String() string {
	if int(s) < NumCapacityStates {
		return capacityStateNames[s]
	}
	return fmt.Sprintf("capacity_state(%d)", uint8(s))
}

// Capacity is one capacity probe's result, a plain value. All sizes are
// bytes.
type Capacity struct {
	State CapacityState
	// FreeBytes is what the store's file system has available to an
	// unprivileged writer (statfs f_bavail × f_bsize).
	FreeBytes uint64
	// StoreBytes is the apparent size of the store's files (the active
	// file and the rotated generations) in the configured directory.
	StoreBytes uint64
	// BudgetBytes is the most the store occupies once rotation bounds it:
	// (audit_max_retained_files + 1) × audit_max_file_bytes.
	BudgetBytes uint64
	// ReserveBytes is registrar.audit_store_reserve_bytes.
	ReserveBytes uint64
	// NeededBytes is the free space state ok requires:
	// max(BudgetBytes − StoreBytes, 0) + ReserveBytes.
	NeededBytes uint64
	// MaxFileBytes is audit_max_file_bytes: below it, the state is critical.
	MaxFileBytes uint64
	// AppendFailures counts failed appends since the store was opened.
	AppendFailures uint64
	// HeldFiles is how many generations retention keeps past
	// audit_max_retained_files for audit_min_retention_seconds; the state
	// is retention_held while it is not 0 (unless unwritable).
	HeldFiles uint64
}

// Classify applies the state arithmetic (see CapacityState) and returns
// the state and the free space ok needs. Sums and products saturate.
func Classify(free, store, budget, reserve, maxFile uint64, lastFailed bool) (CapacityState, uint64) {
	growth := uint64(0)
	if budget > store {
		growth = budget - store
	}
	needed := addSat(growth, reserve)
	switch {
	case lastFailed:
		return CapacityUnwritable, needed
	case free < maxFile:
		return CapacityCritical, needed
	case free < needed:
		return CapacityLow, needed
	}
	return CapacityOK, needed
}

// BudgetBytes is the rotation budget (retained + 1) × maxFile, saturating.
func BudgetBytes(maxFile uint64, retained uint32) uint64 {
	return mulSat(uint64(retained)+1, maxFile)
}

// CapacityProbe measures the store's capacity when Probe is called (the
// daemon calls it on its tick) and keeps the last result for readers
// (the health snapshot, the gauges), who never probe themselves. It is safe
// for concurrent use.
type CapacityProbe struct {
	store   *Store
	reserve atomic.Uint64 // SetReserve changes it
	statfs  func(path string) (uint64, error)
	last    atomic.Pointer[Capacity]
}

// NewCapacityProbe returns a probe of s with the given reserve in bytes
// (0: no reserve), probed once already so Last is meaningful at once. An
// error of that first probe is returned with the probe (usable: the next
// Probe retries).
func NewCapacityProbe(s *Store, reserveBytes uint64) (*CapacityProbe, error) {
	if s == nil {
		return nil, errors.New("audit: NewCapacityProbe: nil store")
	}
	p := &CapacityProbe{store: s, statfs: statfsFree}
	p.reserve.Store(reserveBytes)
	_, err := p.Probe()
	return p, err
}

// Probe measures free space (statfs of the record directory, or of its
// nearest existing ancestor while it is missing), the store's bytes and the
// store's failure state, publishes the result for Last and returns it. When
// statfs fails, the last free figure is kept and the error returned.
//
// First, when retention holds a generation that has aged past the minimum
// retention, Probe has the store run retention (Store.Retain), so a held
// store is released on the tick after its oldest file ages out, though no
// rotation comes.
func (p *CapacityProbe) Probe() (Capacity, error) {
	s := p.store
	var errs []error
	if s.retentionDue() {
		if err := s.Retain(); err != nil {
			errs = append(errs, err)
		}
	}
	st := s.Stats()
	c := Capacity{
		BudgetBytes:    BudgetBytes(s.maxFile, s.maxRetained),
		ReserveBytes:   p.reserve.Load(),
		MaxFileBytes:   s.maxFile,
		AppendFailures: st.AppendFailures,
		HeldFiles:      st.HeldFiles,
	}
	free, err := p.free()
	if err != nil {
		if prev := p.last.Load(); prev != nil {
			free = prev.FreeBytes
		}
		errs = append(errs, err)
	}
	c.FreeBytes = free
	c.StoreBytes, err = storeBytes(s.dir)
	if err != nil {
		errs = append(errs, err)
	}
	c.State, c.NeededBytes = Classify(c.FreeBytes, c.StoreBytes, c.BudgetBytes, c.ReserveBytes, c.MaxFileBytes, st.LastAppendFailed)
	if c.HeldFiles > 0 && c.State != CapacityUnwritable {
		c.State = CapacityRetentionHeld
	}
	p.last.Store(&c)
	if len(errs) > 0 {
		return c, fmt.Errorf("audit: capacity probe: %w", errors.Join(errs...))
	}
	return c, nil
}

// SetReserve sets the reserve in bytes (a reload of
// registrar.audit_store_reserve_bytes); the next Probe classifies with it.
func (p *CapacityProbe) SetReserve(reserveBytes uint64) { p.reserve.Store(reserveBytes) }

// Last returns the last published probe result.
func (p *CapacityProbe) Last() Capacity {
	if c := p.last.Load(); c != nil {
		return *c
	}
	return Capacity{}
}

// free statfs-es the record directory, walking up to the nearest existing
// ancestor while the directory is missing (the file system it will be
// re-created on).
func (p *CapacityProbe) free() (uint64, error) {
	path := filepath.Clean(p.store.dir)
	for {
		n, err := p.statfs(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return n, err
		}
		path = parent
	}
}

// storeBytes sums the apparent sizes of the store's own files in dir (the
// active file and the rotated generations, regular files only); a missing
// directory holds 0 bytes.
func storeBytes(dir string) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if _, _, gen := parseGeneration(name); !gen && name != ActiveFileName {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile (trimmed)
		}
		if sz := fi.Size(); sz > 0 {
			total = addSat(total, uint64(sz))
		}
	}
	return total, nil
}

func addSat(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

func mulSat(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}
