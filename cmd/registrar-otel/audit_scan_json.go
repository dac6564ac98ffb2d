package main

// `audit scan --json`: the stable shape (docs/en/operations.md, --json
// schemas).

import (
	"encoding/json"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// scanJSON is the stable --json shape. Lists are always arrays, never
// null; durations are whole seconds; times use the audit TimeLayout.
type scanJSON struct {
	Dir                  string                 `json:"dir"`
	Now                  string                 `json:"now"`
	WindowSeconds        int64                  `json:"window_seconds"`
	GraceSeconds         int64                  `json:"grace_seconds"`
	Anomalies            bool                   `json:"anomalies"`
	IntentWithoutOutcome uint64                 `json:"intent_without_outcome"`
	MalformedRecords     uint64                 `json:"malformed_records"`
	MalformedByRule      map[audit.Rule]uint64  `json:"malformed_by_rule"`
	Malformed            []scanMalformedJSON    `json:"malformed"`
	UnpairedIntents      []scanUnpairedJSON     `json:"unpaired_intents"`
	Limited              map[string]scanLimJSON `json:"limited"`
	Records              map[string]uint64      `json:"records"`
	Files                []string               `json:"files"`
	Skipped              []scanSkippedJSON      `json:"skipped"`
	StoreAnomalies       []scanStoreAnomalyJSON `json:"store_anomalies"`
	LateLimitedRecords   uint64                 `json:"late_limited_records"`
	EvidenceGaps         []scanGapJSON          `json:"evidence_gaps"`
	// With --by identity only.
	LimitedByIdentity        []scanIdentityJSON     `json:"limited_by_identity,omitempty"`
	LimitedByIdentityOmitted *int                   `json:"limited_by_identity_omitted,omitempty"`
	LimitedOtherIdentities   map[string]scanLimJSON `json:"limited_other_identities,omitempty"`
	// With --fail-on-limited only.
	FailOnLimited *failOnLimited `json:"fail_on_limited,omitempty"`
}

type scanGapJSON struct {
	File    string `json:"file"`
	Line    uint64 `json:"line"`
	From    string `json:"from"`
	To      string `json:"to"`
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanIdentityJSON struct {
	CallerIdentity string `json:"caller_identity"`
	Bucket         string `json:"bucket"`
	Records        uint64 `json:"records"`
	Count          uint64 `json:"count"`
}

type scanStoreAnomalyJSON struct {
	Kind   audit.StoreAnomalyKind `json:"kind"`
	File   string                 `json:"file"`
	Detail string                 `json:"detail"`
}

type scanMalformedJSON struct {
	File   string     `json:"file"`
	Line   uint64     `json:"line"`
	Rule   audit.Rule `json:"rule"`
	Detail string     `json:"detail"`
}

type scanUnpairedJSON struct {
	File      string `json:"file"`
	Line      uint64 `json:"line"`
	RequestID string `json:"request_id"`
	TS        string `json:"ts"`
}

type scanLimJSON struct {
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanSkippedJSON struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func writeScanJSON(w io.Writer, v scanView) error {
	rep := v.rep
	out := scanJSON{
		Dir:                  rep.Dir,
		Now:                  rep.Now.UTC().Format(audit.TimeLayout),
		WindowSeconds:        int64(rep.Window / time.Second),
		GraceSeconds:         int64(rep.Grace / time.Second),
		Anomalies:            rep.Anomalies(),
		IntentWithoutOutcome: rep.IntentWithoutOutcome,
		MalformedRecords:     rep.MalformedRecords,
		MalformedByRule:      rep.MalformedByRule,
		Malformed:            []scanMalformedJSON{},
		UnpairedIntents:      []scanUnpairedJSON{},
		Limited:              map[string]scanLimJSON{},
		Records:              map[string]uint64{},
		Files:                append([]string{}, rep.Files...),
		Skipped:              []scanSkippedJSON{},
		StoreAnomalies:       []scanStoreAnomalyJSON{},
		LateLimitedRecords:   rep.LateLimitedRecords,
		EvidenceGaps:         []scanGapJSON{},
	}
	for _, g := range rep.Gaps {
		out.EvidenceGaps = append(out.EvidenceGaps, scanGapJSON{g.File, g.Line, g.From.UTC().Format(audit.TimeLayout), g.To.UTC().Format(audit.TimeLayout), g.Records, g.Count})
	}
	for _, a := range rep.StoreAnomalies {
		out.StoreAnomalies = append(out.StoreAnomalies, scanStoreAnomalyJSON(a))
	}
	if out.MalformedByRule == nil {
		out.MalformedByRule = map[audit.Rule]uint64{}
	}
	for _, m := range rep.Malformed {
		out.Malformed = append(out.Malformed, scanMalformedJSON(m))
	}
	for _, u := range rep.Unpaired {
		out.UnpairedIntents = append(out.UnpairedIntents, scanUnpairedJSON{u.File, u.Line, u.RequestID, u.TS.UTC().Format(audit.TimeLayout)})
	}
	for b := range vocab.Bucket(vocab.NumBuckets) {
		out.Limited[b.String()] = scanLimJSON(rep.Limited[b])
	}
	for p := audit.PhaseIntent; p <= audit.PhaseLimited; p++ {
		out.Records[p.String()] = rep.Records[p-1]
	}
	for _, s := range rep.Skipped {
		out.Skipped = append(out.Skipped, scanSkippedJSON(s))
	}
	if v.byIdentity {
		rows, omitted := v.shown()
		out.LimitedByIdentity = []scanIdentityJSON{}
		for _, r := range rows {
			out.LimitedByIdentity = append(out.LimitedByIdentity, scanIdentityJSON{r.CallerIdentity, r.Bucket.String(), r.Records, r.Count})
		}
		out.LimitedByIdentityOmitted = &omitted
		out.LimitedOtherIdentities = map[string]scanLimJSON{}
		for b := range vocab.Bucket(vocab.NumBuckets) {
			out.LimitedOtherIdentities[b.String()] = scanLimJSON(rep.LimitedOtherIdentities[b])
		}
	}
	out.FailOnLimited = v.failOn
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
