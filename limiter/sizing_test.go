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
