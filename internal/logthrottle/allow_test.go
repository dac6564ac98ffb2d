package logthrottle_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
)

func TestAllowDecidesOncePerIntervalAndCountsTheRest(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	th := logthrottle.New(nil, time.Minute, c.now)
	if n, ok := th.Allow("k"); !ok || n != 0 {
		t.Fatalf("first call: got (%d, %v), want (0, true)", n, ok)
	}
	for i := range 3 {
		c.advance(10 * time.Second)
		if n, ok := th.Allow("k"); ok || n != 0 {
			t.Fatalf("repeat %d inside the interval: got (%d, %v), want (0, false)", i, n, ok)
		}
	}
	if _, ok := th.Allow("other"); !ok {
		t.Fatal("a second key was held back by the first")
	}
	c.advance(30 * time.Second) // 60 s after the first decision
	if n, ok := th.Allow("k"); !ok || n != 3 {
		t.Fatalf("first call after the interval: got (%d, %v), want (3, true)", n, ok)
	}
	if n, ok := th.Allow("k"); ok || n != 0 {
		t.Fatalf("the count did not restart: got (%d, %v), want (0, false)", n, ok)
	}
}

func TestAllowIgnoresTheLoggersLevel(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	logger := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 100}))
	th := logthrottle.New(logger, time.Minute, c.now)
	th.Allow("k")
	th.Allow("k")
	c.advance(time.Minute)
	if n, ok := th.Allow("k"); !ok || n != 1 {
		t.Fatalf("got (%d, %v), want (1, true): every call is decided and counted", n, ok)
	}
}

func TestAllowAndLogShareOneStatePerKey(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	th := logthrottle.New(newLogger(&buf), time.Minute, c.now)
	th.Allow("k")
	if th.Log(context.Background(), "k", slog.LevelWarn, "x") {
		t.Fatal("Log emitted a line inside the interval Allow opened")
	}
	th.Allow("k")
	c.advance(time.Minute)
	if !th.Log(context.Background(), "k", slog.LevelWarn, "x") {
		t.Fatal("Log held back the first line after the interval")
	}
	if got := buf.String(); !strings.Contains(got, "suppressed=2") {
		t.Errorf("log %q, want suppressed=2 (one by Log, one by Allow)", got)
	}
}
