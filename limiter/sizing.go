package limiter

import (
	"errors"
	"math/bits"
)

// Sizing is the bring-up arithmetic for the admission bucket. There is
// effectively one control-plane identity, so a bring-up wave is one burst on
// one bucket: rate_limit_admission_burst ≥ wave_hosts × modules_per_host.
// A larger wave still completes, taking
// (mints − burst) × rate_limit_admission_refill_interval_ms / 1000 extra
// seconds.
type Sizing struct {
	WaveHosts      uint64
	ModulesPerHost uint64
	// Mints is WaveHosts × ModulesPerHost: the mints in one wave.
	Mints uint64
	// Burst and RefillIntervalMS are the configured admission bucket.
	Burst            uint32
	RefillIntervalMS uint32
	// Covered reports Burst ≥ Mints: the wave is admitted at once.
	Covered bool
	// BurstNeeded is the smallest burst that covers the wave (= Mints).
	BurstNeeded uint64
	// ExtraMillis is (Mints − Burst) × RefillIntervalMS, the extra time the
	// wave takes in milliseconds; 0 when covered. With several instances,
	// (PerInstanceMints − PerInstanceBurst) × PerInstanceIntervalMS.
	ExtraMillis uint64
	// Instances is the number of registrars sharing the bucket
	// (registrar.instances; 1 for one registrar), each holding
	// PerInstanceBurst = Burst / Instances tokens (rounded down) and
	// refilling one per PerInstanceIntervalMS = RefillIntervalMS ×
	// Instances, and taking PerInstanceMints = ⌈Mints / Instances⌉ of
	// the wave when the balancer spreads it evenly (the busiest one's).
	Instances             uint32
	PerInstanceBurst      uint32
	PerInstanceIntervalMS uint64
	PerInstanceMints      uint64
}

// ErrSizingOverflow reports a wave too large to compute with.
var ErrSizingOverflow = errors.New("limiter: wave size overflows 64 bits")

// Size runs a wave through the sizing formula, for one registrar.
func Size(waveHosts, modulesPerHost uint64, burst, refillIntervalMS uint32) (Sizing, error) {
	return SizeShared(waveHosts, modulesPerHost, burst, refillIntervalMS, 1)
}

// SizeShared runs a wave through the sizing formula when instances
// registrars share the bucket, each enforcing its share (burst / instances,
// one token per interval × instances) and taking an even part of the wave:
// the wave is covered when the busiest registrar's part,
// ⌈mints / instances⌉, fits its share of the burst, which takes a burst of
// ⌈mints / instances⌉ × instances; otherwise it takes the extra
// (part − share) × interval × instances milliseconds. Instances 0 is
// taken as 1, which is Size's formula.
func SizeShared(waveHosts, modulesPerHost uint64, burst, refillIntervalMS, instances uint32) (Sizing, error) {
	hi, mints := bits.Mul64(waveHosts, modulesPerHost)
	if hi != 0 {
		return Sizing{}, ErrSizingOverflow
	}
	n := uint64(max(instances, 1))
	part := mints / n
	if mints%n != 0 {
		part++
	}
	share := uint64(burst) / n
	s := Sizing{
		WaveHosts:             waveHosts,
		ModulesPerHost:        modulesPerHost,
		Mints:                 mints,
		Burst:                 burst,
		RefillIntervalMS:      refillIntervalMS,
		Covered:               part <= share,
		BurstNeeded:           part * n, // ≤ mints + n − 1: no overflow past a wave that fits
		Instances:             uint32(n),
		PerInstanceBurst:      uint32(share),
		PerInstanceIntervalMS: uint64(refillIntervalMS) * n,
		PerInstanceMints:      part,
	}
	if s.BurstNeeded < part {
		return Sizing{}, ErrSizingOverflow
	}
	if !s.Covered {
		hi, extra := bits.Mul64(part-share, s.PerInstanceIntervalMS)
		if hi != 0 {
			return Sizing{}, ErrSizingOverflow
		}
		s.ExtraMillis = extra
	}
	return s, nil
}
