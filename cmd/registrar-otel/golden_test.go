package main

// Golden tests of every --json output (and the interrupted load summary):
// the schema documented in docs/{en,ko}/operations.md#json-output. Run
// "make golden" (go test -update) to rewrite them after a deliberate
// change, and review the diff.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make golden to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run make golden and review the diff):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestGoldenVersionJSON(t *testing.T) {
	v, r := buildinfo.Version, buildinfo.Revision
	t.Cleanup(func() { buildinfo.Version, buildinfo.Revision = v, r })
	buildinfo.Version, buildinfo.Revision = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		args []string
		file string
	}{{[]string{"version", "--json"}, "version.json"}, {[]string{"version"}, "version.txt"}} {
		code, out, _ := runDispatch(tc.args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
		golden(t, tc.file, []byte(strings.ReplaceAll(out, runtime.Version(), "GOVERSION")))
	}
}

func TestGoldenSizingJSON(t *testing.T) {
	for _, tc := range []struct {
		hosts, modules string
		file           string
	}{
		{"64", "8", "sizing_covered.json"},
		{"200", "8", "sizing_uncovered.json"},
		{"1", "513", "sizing_fraction.json"},
	} {
		code, out, errOut := runDispatch("sizing", "--wave-hosts", tc.hosts, "--modules-per-host", tc.modules, "--json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		golden(t, tc.file, []byte(out))
	}
}

func TestGoldenConfigCheckJSON(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := validTLSFiles(t, dir)
	os.Mkdir(filepath.Join(dir, "audit"), 0o700)
	doc := func(extra string) string {
		return fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
tls_listen = "127.0.0.1:8443"
tls_cert_file = %q
tls_key_file = %q
tls_client_ca_file = %q
audit_store_backend = "segmented"
%s
[registrar.components.review]
multiplicity = "many-per-host"
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
[telemetry]
otlp_endpoint = "http://127.0.0.1:4318"
trace_sample_per_million = 250000
`, filepath.Join(dir, "run", "registrar.sock"), filepath.Join(dir, "lib"), filepath.Join(dir, "audit"), cert, key, ca, extra)
	}
	for _, tc := range []struct {
		doc  string
		code int
		file string
	}{
		{doc(""), configCheckOK, "config_check_ok.json"},
		{doc("rate_limit_admision_burst = 4096"), configCheckInvalid, "config_check_misspelt.json"},
		{"[registrar]\nrate_limit_admission_burst = 0\nmax_wrap_ttl_seconds = -1\n", configCheckInvalid, "config_check_invalid.json"},
	} {
		path := filepath.Join(dir, "registrar.toml")
		if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := configCheckOutput([]string{"--config", path, "--json"}, nil)
		if code != tc.code || errOut != "" {
			t.Fatalf("%s: exit %d (want %d), stderr %q", tc.file, code, tc.code, errOut)
		}
		golden(t, tc.file, []byte(strings.ReplaceAll(out, dir, "$DIR")))
	}
}

// fixedReport is a load run as loadgen returns it, with fixed figures.
func fixedReport(interrupted bool) loadgen.Report {
	r := loadgen.Report{
		Progress: loadgen.Progress{Target: 12, Done: 12, Admitted: 10, Throttled: 3, Refused: 2, Elapsed: 2500 * time.Millisecond},
		Requests: 15, ByID: map[wire.ErrorID]uint64{wire.RegistrarBusy: 3, wire.ServiceLabelInvalid: 2},
		MaxRetryAfter: 1, P50: 1200 * time.Microsecond, P99: 8 * time.Millisecond,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RootSpan: "bringup.wave",
	}
	if interrupted {
		r.Done, r.Admitted, r.Refused, r.Abandoned, r.Interrupted = 7, 6, 1, 2, true
	}
	return r
}

func TestGoldenLoadJSON(t *testing.T) {
	for _, tc := range []struct {
		file        string
		sum         loadSummary
		interrupted bool
		text        bool
	}{
		{"load_wave.json", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, false, false},
		{"load_wave_interrupted.json", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, true, false},
		{"load_wave_interrupted.txt", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, true, true},
		{"load_flood.json", loadSummary{Command: "flood", Flood: &floodJSON{Bucket: "admission", Requests: 12}}, false, false},
	} {
		rep := fixedReport(tc.interrupted)
		if tc.sum.Command == "flood" {
			rep.TraceID, rep.RootSpan = "", ""
		}
		s := tc.sum
		s.fill("var/run/registrar.sock", &rep)
		if tc.interrupted {
			s.Signal = "SIGINT"
		}
		s.Daemon = &daemonJSON{LimitedPredecisionRefusal: 0, LimitedAdmission: 3}
		s.Counted = &countedJSON{Dir: "var/audit", Admission: scanLimJSON{Records: 1, Count: 3}}
		var out bytes.Buffer
		if tc.text {
			printSummary(&out, &s)
		} else if err := writeJSON(&out, &s); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, out.Bytes())
	}
	// The failure shapes: no daemon answer, an audit directory that is not there.
	rep := fixedReport(false)
	rep.Failed, rep.FirstError = 1, errors.New("wire: POST /v1/mint on unix socket var/run/registrar.sock: EOF")
	rep.RootSpan = "load.flood" // a flood with a tracer has its own root span
	s := loadSummary{Command: "flood", Flood: &floodJSON{Bucket: "predecision_refusal", Requests: 12}}
	s.fill("var/run/registrar.sock", &rep)
	s.DaemonError = "no daemon socket at var/run/registrar.sock (no such file)"
	s.Counted = countedRecords(filepath.Join(t.TempDir(), "absent"), &loadFlags{})
	s.Counted.Error = strings.ReplaceAll(s.Counted.Error, s.Counted.Dir, "$DIR")
	s.Counted.Dir = "$DIR"
	var out bytes.Buffer
	writeJSON(&out, &s)
	golden(t, "load_flood_failed.json", out.Bytes())
}

func TestGoldenAuditScanJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "audit")
	s, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	lim := scanLimited(limiter.Admission, 41)
	lim.WindowStart, lim.WindowEnd = at.Add(-time.Minute), at
	// A record recovered after an unclean stop: window_end at the
	// checkpoint, written 30 s later at the restart.
	recovered := scanLimited(limiter.Admission, 9)
	recovered.WindowStart, recovered.WindowEnd = at.Add(-40*time.Second), at.Add(-30*time.Second)
	for _, r := range []*audit.Record{scanIntent("r-1"), scanOutcome("r-1"), scanIntent("r-crashed"), lim, recovered} {
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeScanJSON(&out, scanView{rep: rep}); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan.json", []byte(strings.ReplaceAll(out.String(), dir, "$DIR")))
}
