package audittest

import (
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
)

// Alternate runs b's loop as rounds of two slices, mints into the unsealed
// store (slice(0)) then the sealed one (slice(1)), the order swapped every
// other round, each slice timed on its own, so a load that comes and goes
// slows both alike. It reports the ratio of the sealed store's mints per
// second to the unsealed store's over all slices, the ratio of their CPU
// time per mint (when the platform reads it) and the sealed store's mints
// per second. Every slice mints slice mints.
func Alternate(b *testing.B, mints int, slice func(sealed int)) {
	b.Helper()
	var wall, cpu [2]time.Duration
	round := 0
	for b.Loop() {
		for k := range 2 {
			which := k ^ round&1
			start, c := time.Now(), cputime.Now()
			slice(which)
			wall[which] += time.Since(start)
			cpu[which] += cputime.Now() - c
		}
		round++
	}
	// Same mints in each store: the ratio of rates is the inverse ratio
	// of times.
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "sealed/unsealed-mints/s")
	if cputime.Available() {
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "sealed/unsealed-cpu/mint")
	}
	b.ReportMetric(float64(round*mints)/wall[1].Seconds(), "sealed-mints/s")
}
