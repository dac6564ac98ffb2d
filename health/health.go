// Package health holds the registrar_health container every response
// carries: one shared snapshot for the whole container, refreshed on the
// daemon's tick and never computed per request.
//
// The container is a JSON object of named members. Each member is filled by
// a Source; adding a member means adding a field to Container and a Source,
// without touching any other member. Members are additive: a reader must
// ignore members it does not know, and Container keeps them (a decoded
// container re-encodes every member it received, unknown ones unchanged).
//
//	{"limiter":{"limited_predecision_refusal":0,"limited_admission":0},
//	 "audit_capacity":{"state":"ok","free_bytes":0,"store_bytes":0,"budget_bytes":0,"append_failures":0},
//	 "restart":{"unclean":false,"checkpoint":"none","evidence_gap_from":"","evidence_gap_to":"",
//	            "recovered_records":0,"recovered_count":0}}
package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Container is the registrar_health object. Its JSON encoding is the known
// members in field order (limiter, audit_capacity, restart), or, for a container
// decoded from JSON, every member in the order received, members this
// version does not know byte for byte (a known member missing from the
// input is appended). A Container is a plain value; a decoded one is not
// safe to modify concurrently with encoding.
type Container struct {
	// Limiter reports limited invocations since daemon start, per bucket.
	Limiter LimiterMember `json:"limiter"`
	// AuditCapacity reports the audit store's capacity state, from the
	// capacity probe the daemon runs on its tick.
	AuditCapacity AuditCapacityMember `json:"audit_capacity"`
	// Restart reports how the previous run stopped, as this start found
	// it: an unclean stop and the counted evidence recovered from its
	// checkpoint.
	Restart RestartMember `json:"restart"`

	// received is every member of a decoded container, in order; the
	// values of known members are re-encoded from the fields above.
	received []member
}

type member struct {
	name string
	raw  json.RawMessage
}

// The known members' names, in encoding order.
const (
	memberLimiter       = "limiter"
	memberAuditCapacity = "audit_capacity"
	memberRestart       = "restart"
)

var knownMembers = [...]string{memberLimiter, memberAuditCapacity, memberRestart}

func (c *Container) knownValue(name string) any {
	switch name {
	case memberLimiter:
		return c.Limiter
	case memberAuditCapacity:
		return c.AuditCapacity
	case memberRestart:
		return c.Restart
	}
	return nil
}

// MarshalJSON encodes the container (see Container).
func (c Container) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	put := func(name string, v any, raw json.RawMessage) error {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		if v == nil {
			b.Write(raw)
			return nil
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("member %s: %w", name, err)
		}
		b.Write(enc)
		return nil
	}
	var seen [len(knownMembers)]bool
	for _, m := range c.received {
		i := knownIndex(m.name)
		switch {
		case i < 0: // a member this version does not know: as received
			if err := put(m.name, nil, m.raw); err != nil {
				return nil, err
			}
		case !seen[i]: // a known member, in its received place
			seen[i] = true
			if err := put(m.name, c.knownValue(m.name), nil); err != nil {
				return nil, err
			}
		} // a known member repeated in the input is encoded once
	}
	for i, k := range knownMembers {
		if !seen[i] {
			if err := put(k, c.knownValue(k), nil); err != nil {
				return nil, err
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// knownIndex is name's index in knownMembers, or -1.
func knownIndex(name string) int {
	for i, k := range knownMembers {
		if k == name {
			return i
		}
	}
	return -1
}

// UnmarshalJSON decodes a registrar_health object: known members into their
// fields (unknown keys inside them ignored), every member kept in order so
// that encoding gives back the members this version does not know
// unchanged.
func (c *Container) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("health: registrar_health: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("health: registrar_health must be a JSON object")
	}
	var out Container
	out.received = []member{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("health: registrar_health: %w", err)
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("health: registrar_health.%s: %w", name, err)
		}
		switch name {
		case memberLimiter:
			if err := json.Unmarshal(raw, &out.Limiter); err != nil {
				return fmt.Errorf("health: registrar_health.%s: %w", name, err)
			}
		case memberAuditCapacity:
			if err := json.Unmarshal(raw, &out.AuditCapacity); err != nil {
				return fmt.Errorf("health: registrar_health.%s: %w", name, err)
			}
		case memberRestart:
			if err := json.Unmarshal(raw, &out.Restart); err != nil {
				return fmt.Errorf("health: registrar_health.%s: %w", name, err)
			}
		}
		out.received = append(out.received, member{name: name, raw: raw})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("health: registrar_health: %w", err)
	}
	*c = out
	return nil
}

// Unknown returns the names of the members this version does not know, in
// the order received (nil for a container not decoded from JSON).
func (c *Container) Unknown() []string {
	var out []string
	for _, m := range c.received {
		if knownIndex(m.name) < 0 {
			out = append(out, m.name)
		}
	}
	return out
}

// LimiterMember is the limiter member: the two per-bucket counters of
// limited invocations since daemon start, read from the counting sink. Two
// fields, never a sum: a rising limited_predecision_refusal says someone is
// flooding malformed input while those callers still got their real
// answers; a rising limited_admission says legitimate traffic is being held
// back and a bring-up may be stalling.
type LimiterMember struct {
	LimitedPredecisionRefusal uint64 `json:"limited_predecision_refusal"`
	LimitedAdmission          uint64 `json:"limited_admission"`
}

// AuditCapacityMember is the audit_capacity member: the audit store's
// capacity state as the last capacity probe (on the daemon tick) measured
// it. State is "ok", "low", "critical", "retention_held" or "unwritable"
// (see audit.CapacityState for the arithmetic); the sizes are bytes;
// AppendFailures counts failed audit appends since daemon start.
type AuditCapacityMember struct {
	State          string `json:"state"`
	FreeBytes      uint64 `json:"free_bytes"`
	StoreBytes     uint64 `json:"store_bytes"`
	BudgetBytes    uint64 `json:"budget_bytes"`
	AppendFailures uint64 `json:"append_failures"`
}

// RestartMember is the restart member: what this start found of the
// previous run's stop. It is fixed at start. Unclean is true when the
// previous run stopped without its shutdown flush (SIGKILL, a crash, an OOM
// kill, a power loss); then limited invocations between EvidenceGapFrom
// (the last checkpoint's instant, "" when no checkpoint could be read) and
// EvidenceGapTo (this start) may be uncounted, and RecoveredRecords counted
// records, of RecoveredCount invocations, were written from the checkpoint.
// Checkpoint is "none" (clean stop or first start), "ok", "stale" (the
// newest checkpoint write was torn; the one before it was used) or
// "unreadable" (nothing could be recovered). Times are RFC 3339 UTC with
// milliseconds, "" when clean.
type RestartMember struct {
	Unclean          bool   `json:"unclean"`
	Checkpoint       string `json:"checkpoint"`
	EvidenceGapFrom  string `json:"evidence_gap_from"`
	EvidenceGapTo    string `json:"evidence_gap_to"`
	RecoveredRecords uint64 `json:"recovered_records"`
	RecoveredCount   uint64 `json:"recovered_count"`
}

// RestartSource fills the restart member with m, fixed at start.
func RestartSource(m RestartMember) Source {
	return func(h *Container) { h.Restart = m }
}

// Source fills its member of the container. Sources run on the refresh
// (the daemon tick), never on a request.
type Source func(*Container)

// LimiterSource reads the limiter member from the counting sink.
func LimiterSource(c *counting.Sink) Source {
	return func(h *Container) {
		h.Limiter = LimiterMember{
			LimitedPredecisionRefusal: c.Count(vocab.PredecisionRefusal),
			LimitedAdmission:          c.Count(vocab.Admission),
		}
	}
}

// AuditCapacitySource reads the audit_capacity member from the probe's last
// result; it never probes (the tick does, before the refresh).
func AuditCapacitySource(p *audit.CapacityProbe) Source {
	return func(h *Container) {
		c := p.Last()
		h.AuditCapacity = AuditCapacityMember{
			State:          c.State.String(),
			FreeBytes:      c.FreeBytes,
			StoreBytes:     c.StoreBytes,
			BudgetBytes:    c.BudgetBytes,
			AppendFailures: c.AppendFailures,
		}
	}
}

// Snapshot is one refreshed container and its JSON encoding. It is
// immutable once published.
type Snapshot struct {
	Container Container
	// JSON is Container encoded, ready to embed in a response.
	JSON json.RawMessage
}

// Holder is the shared snapshot holder. Current is a single atomic load;
// Refresh rebuilds the whole container from every source and publishes it
// at once, so a response never mixes members of different ages. A Holder is
// safe for concurrent use.
type Holder struct {
	sources []Source
	cur     atomic.Pointer[Snapshot]
}

// NewHolder returns a holder over sources, already refreshed once.
func NewHolder(sources ...Source) (*Holder, error) {
	h := &Holder{sources: sources}
	if err := h.Refresh(); err != nil {
		return nil, err
	}
	return h, nil
}

// Refresh rebuilds the snapshot from every source and publishes it.
func (h *Holder) Refresh() error {
	var c Container
	for _, s := range h.sources {
		s(&c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("health: encode: %w", err)
	}
	h.cur.Store(&Snapshot{Container: c, JSON: b})
	return nil
}

// Current returns the last published snapshot.
func (h *Holder) Current() *Snapshot { return h.cur.Load() }
