package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// TestAFloodLeavesOneStoreFile lists the audit directory after a flood of
// both kinds (refusals and admissions past their bursts), a tick and the
// shutdown flush: the evidence is one store — the one active file, a
// regular file, no second file, no directory, no version or index file —
// and every line of it decodes as one record of the one encoding, the
// counted records among them.
func TestAFloodLeavesOneStoreFile(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	ctx := context.Background()
	for range 200 {
		r.client.Mint(ctx, mint("BAD"))
		r.client.Mint(ctx, mint("review"))
	}
	r.tick()
	r.stop(t)

	dir := cfg.Registrar.AuditRecordDir
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(ents) != 1 || ents[0].Name() != audit.ActiveFileName || !ents[0].Type().IsRegular() {
		t.Fatalf("audit directory after a flood holds %q, want exactly the regular file %q", names, audit.ActiveFileName)
	}
	b, err := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if err != nil {
		t.Fatal(err)
	}
	phases := map[audit.Phase]int{}
	for line := range bytes.Lines(b) {
		rec, err := audit.Unmarshal(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatalf("a line that is not a record of the store's encoding: %v: %q", err, line)
		}
		phases[rec.Phase]++
	}
	if phases[audit.PhaseLimited] == 0 || phases[audit.PhaseIntent] == 0 {
		t.Fatalf("records by phase %v: want the flood's counted records beside the intents", phases)
	}
}
