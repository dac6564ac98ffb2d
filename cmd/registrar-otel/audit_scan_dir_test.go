package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

func TestAuditScanListsARenamedActiveFileAndReportsTheMissingOne(t *testing.T) {
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"))
	if err := os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, audit.ActiveFileName+".1")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := auditScanOutput("--dir", dir)
	if code != auditScanAnomalies {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"files read: 0, skipped: 1",
		"skipped registrar-audit.jsonl.1: unrecognised name",
		"store_anomalies: 1",
		"missing_active_file registrar-audit.jsonl:",
		"ANOMALIES FOUND",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = auditScanOutput("--dir", dir, "--json")
	var got struct {
		Anomalies      bool `json:"anomalies"`
		Skipped        []struct{ Name, Reason string }
		StoreAnomalies []struct{ Kind, File, Detail string } `json:"store_anomalies"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != auditScanAnomalies {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if !got.Anomalies || len(got.StoreAnomalies) != 1 || got.StoreAnomalies[0].Kind != "missing_active_file" || got.StoreAnomalies[0].Detail == "" {
		t.Errorf("store_anomalies %+v", got.StoreAnomalies)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Name != "registrar-audit.jsonl.1" || !strings.HasPrefix(got.Skipped[0].Reason, "unrecognised name") {
		t.Errorf("skipped %+v", got.Skipped)
	}
}

func TestAuditScanReportsAGenerationGap(t *testing.T) {
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"))
	for _, g := range []string{"registrar-audit-20260101T000000Z-000003.jsonl", "registrar-audit-20260101T000100Z-000005.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, g), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := auditScanOutput("--dir", dir, "--window", "87600h")
	if code != auditScanAnomalies || !strings.Contains(out, "generation_gap registrar-audit-20260101T000100Z-000005.jsonl: generation numbers jump from 000003") ||
		!strings.Contains(out, "1 generation(s) between them are missing") {
		t.Fatalf("exit %d, want 1 and the gap:\n%s", code, out)
	}
}
