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
	// wave takes in milliseconds; 0 when covered.
	ExtraMillis uint64
}

// ErrSizingOverflow reports a wave too large to compute with.
var ErrSizingOverflow = errors.New("limiter: wave size overflows 64 bits")

// Size runs a wave through the sizing formula.
func Size(waveHosts, modulesPerHost uint64, burst, refillIntervalMS uint32) (Sizing, error) {
	hi, mints := bits.Mul64(waveHosts, modulesPerHost)
	if hi != 0 {
		return Sizing{}, ErrSizingOverflow
	}
	s := Sizing{
		WaveHosts:        waveHosts,
		ModulesPerHost:   modulesPerHost,
		Mints:            mints,
		Burst:            burst,
		RefillIntervalMS: refillIntervalMS,
		Covered:          mints <= uint64(burst),
		BurstNeeded:      mints,
	}
	if !s.Covered {
		hi, extra := bits.Mul64(mints-uint64(burst), uint64(refillIntervalMS))
		if hi != 0 {
			return Sizing{}, ErrSizingOverflow
		}
		s.ExtraMillis = extra
	}
	return s, nil
}
