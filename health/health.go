// Package health holds the registrar_health container every response
// carries: one shared snapshot for the whole container, refreshed on the
// daemon's tick and never computed per request.
//
// The container is a JSON object of named members. Each member is filled by
// a Source; adding a member means adding a field to Container and a Source,
// without touching any other member. Members are additive: a reader must
// ignore members it does not know.
//
//	{"limiter":{"limited_predecision_refusal":0,"limited_admission":0}}
package health

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// Container is the registrar_health object.
type Container struct {
	// Limiter reports limited invocations since daemon start, per bucket.
	Limiter LimiterMember `json:"limiter"`
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

// Source fills its member of the container. Sources run on the refresh
// (the daemon tick), never on a request.
type Source func(*Container)

// LimiterSource reads the limiter member from the counting sink.
func LimiterSource(c *counting.Sink) Source {
	return func(h *Container) {
		h.Limiter = LimiterMember{
			LimitedPredecisionRefusal: c.Count(limiter.PredecisionRefusal),
			LimitedAdmission:          c.Count(limiter.Admission),
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
