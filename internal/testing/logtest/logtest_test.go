package logtest_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
)

func TestConcurrentWritersLoseNoLine(t *testing.T) {
	var b logtest.Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "writer=%d line=%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := len(b.Lines()); n != 800 {
		t.Fatalf("got %d lines, want 800", n)
	}
}

func TestLinesKeepsThoseWithEverySubstring(t *testing.T) {
	var b logtest.Buffer
	b.Write([]byte("level=ERROR msg=a key=1\nlevel=INFO msg=a\n\nlevel=ERROR msg=b\n"))
	if got, want := b.Lines("ERROR", "msg=a"), []string{"level=ERROR msg=a key=1"}; !slices.Equal(got, want) {
		t.Fatalf("Lines = %q, want %q", got, want)
	}
}
