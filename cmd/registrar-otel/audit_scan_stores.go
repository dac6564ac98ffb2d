package main

// `audit scan --dir A --dir B`: several registrars' stores, each scanned
// as one, then compared (audit.ScanStores).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

// dirList is a repeatable --dir.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	if v == "" {
		return errors.New("needs a directory")
	}
	*d = append(*d, v)
	return nil
}

// storesJSON is the --json shape of several stores: each store's own
// object (the one-store shape), what they show together, and the verdict
// over all.
type storesJSON struct {
	Anomalies     bool           `json:"anomalies"`
	Stores        []scanJSON     `json:"stores"`
	CrossStore    crossJSON      `json:"cross_store"`
	FailOnLimited *failOnLimited `json:"fail_on_limited,omitempty"`
}

type crossJSON struct {
	ClockSkewSeconds float64            `json:"clock_skew_seconds"`
	Registrations    uint64             `json:"registrations"`
	Answers          uint64             `json:"answers"`
	Findings         uint64             `json:"findings"`
	ByKind           map[string]uint64  `json:"by_kind"`
	List             []crossFindingJSON `json:"list"`
	SettledElsewhere uint64             `json:"settled_elsewhere"`
	Unchecked        uint64             `json:"unchecked"`
}

type crossFindingJSON struct {
	Kind         string           `json:"kind"`
	Registration string           `json:"registration"`
	Earlier      *crossAnswerJSON `json:"earlier"` // null for unsettled_intent
	Later        crossAnswerJSON  `json:"later"`
	Detail       string           `json:"detail"`
}

type crossAnswerJSON struct {
	Dir       string `json:"dir"`
	File      string `json:"file"`
	Line      uint64 `json:"line"`
	RequestID string `json:"request_id"`
	Verb      string `json:"verb"`
	// Outcome is the outcome's class; "" for an intent.
	Outcome string `json:"outcome"`
	Intent  string `json:"intent_ts"`
	TS      string `json:"ts"`
}

func runAuditScanStores(dirs []string, window, skew time.Duration, asJSON, byIdentity bool, top uint, failOn uint64, failOnSet bool, stdout, stderr io.Writer) int {
	m, err := audit.ScanStores(context.Background(), audit.ScanOptions{Window: window, ByIdentity: byIdentity, ClockSkew: skew}, dirs)
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = fmt.Errorf("%s: %w", pe.Path, pe.Err)
		}
		fmt.Fprintf(stderr, "audit scan: cannot read the record stores: %v\n", cause)
		return auditScanFailed
	}
	var fo *failOnLimited
	if failOnSet {
		var total uint64
		for _, r := range m.Stores {
			total = addSat(total, totalLimited(r))
		}
		fo = &failOnLimited{Threshold: failOn, Limited: total, Exceeded: total > failOn}
	}
	views := make([]scanView, len(m.Stores))
	for i, r := range m.Stores {
		views[i] = scanView{rep: r, byIdentity: byIdentity, top: top}
	}
	if asJSON {
		err = writeJSON(stdout, storesJSONOf(m, dirs, views, fo))
	} else {
		err = writeStoresText(stdout, m, dirs, views, fo)
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit scan: writing the report: %v\n", err)
		return auditScanFailed
	}
	switch {
	case m.Anomalies():
		return auditScanAnomalies
	case fo != nil && fo.Exceeded:
		return auditScanLimited
	}
	return auditScanClean
}

func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func crossAnswerOf(a audit.CrossAnswer, dirs []string) crossAnswerJSON {
	out := crossAnswerJSON{Dir: dirs[a.Store], File: a.File, Line: a.Line, RequestID: a.RequestID, Verb: a.Verb.String(),
		Intent: a.Intent.UTC().Format(audit.TimeLayout), TS: a.TS.UTC().Format(audit.TimeLayout)}
	if a.Class != 0 {
		out.Outcome = a.Class.String()
	}
	return out
}

func storesJSONOf(m *audit.MultiReport, dirs []string, views []scanView, fo *failOnLimited) storesJSON {
	c := m.Cross
	out := storesJSON{Anomalies: m.Anomalies(), Stores: []scanJSON{}, FailOnLimited: fo, CrossStore: crossJSON{
		ClockSkewSeconds: c.ClockSkew.Seconds(), Registrations: c.Registrations, Answers: c.Answers, Findings: c.Total(),
		ByKind: map[string]uint64{}, List: []crossFindingJSON{}, SettledElsewhere: c.SettledElsewhere, Unchecked: c.Unchecked,
	}}
	for _, v := range views {
		out.Stores = append(out.Stores, scanJSONOf(v))
	}
	for _, k := range audit.CrossKinds {
		out.CrossStore.ByKind[string(k)] = c.ByKind[k]
	}
	for _, f := range c.Findings {
		j := crossFindingJSON{Kind: string(f.Kind), Registration: f.Registration, Later: crossAnswerOf(f.Later, dirs), Detail: f.Detail}
		if f.Kind != audit.CrossUnsettledIntent {
			e := crossAnswerOf(f.Earlier, dirs)
			j.Earlier = &e
		}
		out.CrossStore.List = append(out.CrossStore.List, j)
	}
	return out
}

// answerText is one answer of a finding as the text report names it.
func answerText(a audit.CrossAnswer, dirs []string) string {
	what := a.Verb.String() + " intent"
	if a.Class != 0 {
		what = a.Verb.String() + " " + a.Class.String()
	}
	return fmt.Sprintf("%s (store %d %s:%d, request_id %s, %s)", what, a.Store+1, a.File, a.Line, a.RequestID, a.TS.UTC().Format(audit.TimeLayout))
}

func writeStoresText(w io.Writer, m *audit.MultiReport, dirs []string, views []scanView, fo *failOnLimited) error {
	p := &errWriter{w: w}
	for i, v := range views {
		p.printf("== store %d of %d: %s ==\n", i+1, len(views), dirs[i])
		if err := writeScanText(w, v); err != nil {
			return err
		}
		p.printf("\n")
	}
	c := m.Cross
	p.printf("== across the %d stores (clock skew %s) ==\n", len(views), c.ClockSkew)
	p.printf("registrations answered: %d, success answers compared: %d\n", c.Registrations, c.Answers)
	if c.Unchecked > 0 {
		p.printf("  %d answers past the first %d were not compared\n", c.Unchecked, audit.MaxCrossAnswers)
	}
	p.printf("intents without an outcome settled by a later answer: %d\n", c.SettledElsewhere)
	p.printf("\ncross_store findings: %d\n", c.Total())
	for _, k := range audit.CrossKinds {
		p.printf("  %-22s %d\n", k, c.ByKind[k])
	}
	for _, f := range c.Findings {
		p.printf("  %s %s: %s", f.Kind, printable(f.Registration), answerText(f.Later, dirs))
		if f.Kind != audit.CrossUnsettledIntent {
			p.printf(" after %s", answerText(f.Earlier, dirs))
		}
		p.printf("\n      %s\n", f.Detail)
	}
	if n := c.Total(); n > uint64(len(c.Findings)) {
		p.printf("  ... and %d more\n", n-uint64(len(c.Findings)))
	}
	if fo != nil {
		verdict := "not more than"
		if fo.Exceeded {
			verdict = "more than"
		}
		p.printf("\nfail-on-limited: %d invocations limited in the window over all the stores, %s %d\n", fo.Limited, verdict, fo.Threshold)
	}
	switch {
	case m.Anomalies():
		p.printf("\nresult: ANOMALIES FOUND\n")
	case fo != nil && fo.Exceeded:
		p.printf("\nresult: no anomalies; LIMITED above --fail-on-limited (exit %d)\n", auditScanLimited)
	default:
		p.printf("\nresult: clean\n")
	}
	return p.err
}
