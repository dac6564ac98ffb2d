package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
)

func TestTheDirectoryGaugeExportsEachDirectoryFromTheStart(t *testing.T) {
	reader, mp := newReader(t)
	var st telemetry.DirectoryStats
	if err := telemetry.RegisterDirectories(mp, func() telemetry.DirectoryStats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	p := points(t, got[telemetry.DirectoryUnsafe])
	if len(p) != 3 || p["directory=audit"] != 0 || p["directory=state"] != 0 || p["directory=socket"] != 0 {
		t.Fatalf("points %v, want audit, state and socket at 0", p)
	}
	if got[telemetry.DirectoryUnsafe].Description == "" {
		t.Errorf("%s has no description", telemetry.DirectoryUnsafe)
	}
	st.Unsafe[1] = true
	if p := points(t, collectAll(t, reader)[telemetry.DirectoryUnsafe]); p["directory=state"] != 1 || p["directory=audit"] != 0 || p["directory=socket"] != 0 {
		t.Fatalf("state unsafe: %v, want state 1 and the others 0", p)
	}
	if err := telemetry.RegisterDirectories(mp, nil); err == nil {
		t.Errorf("a nil stats func was accepted")
	}
}
