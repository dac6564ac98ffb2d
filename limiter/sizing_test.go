package limiter

import (
	"errors"
	"math"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		hosts, modules uint64
		burst, ms      uint32
		want           Sizing
	}{
		{64, 8, 512, 500, Sizing{WaveHosts: 64, ModulesPerHost: 8, Mints: 512, Burst: 512, RefillIntervalMS: 500, Covered: true, BurstNeeded: 512}},
		{200, 8, 512, 500, Sizing{WaveHosts: 200, ModulesPerHost: 8, Mints: 1600, Burst: 512, RefillIntervalMS: 500, BurstNeeded: 1600, ExtraMillis: 544_000}},
		{1, 513, 512, 500, Sizing{WaveHosts: 1, ModulesPerHost: 513, Mints: 513, Burst: 512, RefillIntervalMS: 500, BurstNeeded: 513, ExtraMillis: 500}},
		{0, 8, 512, 500, Sizing{ModulesPerHost: 8, Burst: 512, RefillIntervalMS: 500, Covered: true}},
	} {
		got, err := Size(tc.hosts, tc.modules, tc.burst, tc.ms)
		// One registrar: its share is the whole bucket and the whole wave.
		tc.want.Instances, tc.want.PerInstanceBurst, tc.want.PerInstanceIntervalMS, tc.want.PerInstanceMints = 1, tc.burst, uint64(tc.ms), tc.want.Mints
		if err != nil || got != tc.want {
			t.Errorf("Size(%d, %d, %d, %d) = %+v, %v; want %+v", tc.hosts, tc.modules, tc.burst, tc.ms, got, err, tc.want)
		}
	}
	if _, err := Size(math.MaxUint64, 2, 1, 1); !errors.Is(err, ErrSizingOverflow) {
		t.Errorf("overflowing wave: err = %v, want ErrSizingOverflow", err)
	}
	if _, err := Size(math.MaxUint64/2, 1, 1, math.MaxUint32); !errors.Is(err, ErrSizingOverflow) {
		t.Errorf("overflowing extra time: err = %v, want ErrSizingOverflow", err)
	}
}

// TestSizeSharedSizesTheBusiestRegistrarsShare: with n registrars each
// holds burst / n and refills one per interval × n; an even spread gives
// the busiest ⌈mints / n⌉; the burst needed is that part times n.
func TestSizeSharedSizesTheBusiestRegistrarsShare(t *testing.T) {
	for _, tc := range []struct {
		mints                               uint64
		burst, ms, n                        uint32
		covered                             bool
		share                               uint32
		interval, part, needed, extraMillis uint64
	}{
		// The reference wave over two registrars: the same 544 s.
		{1600, 512, 500, 2, false, 256, 1000, 800, 1600, 544_000},
		{512, 1024, 500, 2, true, 512, 1000, 256, 512, 0},
		// An odd wave: the busiest takes one more.
		{513, 512, 500, 2, false, 256, 1000, 257, 514, 1000},
		// Burst 5 over two: 2 each, one token held by none.
		{5, 5, 1000, 2, false, 2, 2000, 3, 6, 2000},
		{6, 6, 1000, 3, true, 2, 3000, 2, 6, 0},
		// 0 instances is one registrar.
		{10, 8, 100, 0, false, 8, 100, 10, 10, 200},
	} {
		got, err := SizeShared(tc.mints, 1, tc.burst, tc.ms, tc.n)
		if err != nil {
			t.Fatalf("SizeShared(%d, %d, %d, %d): %v", tc.mints, tc.burst, tc.ms, tc.n, err)
		}
		if got.Covered != tc.covered || got.PerInstanceBurst != tc.share || got.PerInstanceIntervalMS != tc.interval ||
			got.PerInstanceMints != tc.part || got.BurstNeeded != tc.needed || got.ExtraMillis != tc.extraMillis || got.Instances != max(tc.n, 1) {
			t.Errorf("SizeShared(%d mints, burst %d, %d ms, %d instances) = %+v; want covered %v, share %d, interval %d, part %d, needed %d, extra %d ms",
				tc.mints, tc.burst, tc.ms, tc.n, got, tc.covered, tc.share, tc.interval, tc.part, tc.needed, tc.extraMillis)
		}
		if again, _ := SizeShared(tc.mints, 1, uint32(got.BurstNeeded), tc.ms, tc.n); !again.Covered {
			t.Errorf("SizeShared: burst_needed %d does not cover the wave of %d mints over %d", got.BurstNeeded, tc.mints, tc.n)
		}
	}
	if _, err := SizeShared(math.MaxUint64, 1, 1, math.MaxUint32, 1024); !errors.Is(err, ErrSizingOverflow) {
		t.Errorf("overflowing extra time: err = %v, want ErrSizingOverflow", err)
	}
}
