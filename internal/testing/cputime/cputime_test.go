package cputime

import "testing"

func TestNowAdvancesWithWork(t *testing.T) {
	if !Available() {
		t.Skip("no CPU clock on this platform")
	}
	start := Now()
	x := 0
	for i := 0; Now() == start && i < 1<<30; i++ {
		x += i
	}
	if Now() <= start {
		t.Fatalf("CPU time did not advance (%d)", x)
	}
}
