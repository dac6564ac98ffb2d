package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/wire"
)

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
		paced       bool
	}{
		{"load_wave.json", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, false, false, false},
		{"load_wave_interrupted.json", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, true, false, false},
		{"load_wave_interrupted.txt", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, true, true, false},
		{"load_wave_paced.json", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, false, false, true},
		{"load_wave_paced.txt", loadSummary{Command: "wave", Wave: &waveJSON{Hosts: 4, ModulesPerHost: 3}}, false, true, true},
		{"load_flood.json", loadSummary{Command: "flood", Flood: &floodJSON{Bucket: "admission", Requests: 12}}, false, false, false},
	} {
		rep := fixedReport(tc.interrupted)
		if tc.paced {
			// A paced wave meets no RegistrarBusy; two answers lacked the fields.
			rep.Throttled, rep.Requests, rep.MaxRetryAfter = 0, 12, 0
			rep.ByID = map[wire.ErrorID]uint64{wire.ServiceLabelInvalid: 2}
			rep.Pacing = &loadgen.Pacing{Wait: 1500 * time.Millisecond, Waits: 3, Uninformed: 2}
		}
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
