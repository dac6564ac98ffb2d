package main

// What a load run prints at its end: the --json schema, its text form, and
// the counted records read from the audit store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// countedRecords reads the counted records of the audit store.
func countedRecords(dir string, lf *loadFlags) *countedJSON {
	c := &countedJSON{Dir: dir}
	scan, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hint := "pass the daemon's --config, or --audit-dir DIR (\"-\" skips this)"
		if lf.config != "" || lf.auditDir != "" {
			hint = "is the daemon's registrar.audit_record_dir elsewhere? pass --audit-dir DIR (\"-\" skips this)"
		}
		c.Error = fmt.Sprintf("%s does not exist; %s", dir, hint)
		return c
	case err != nil:
		c.Error = fmt.Sprintf("cannot read %s: %v", dir, err)
		return c
	}
	c.PredecisionRefusal = scanLimJSON(scan.Limited[vocab.PredecisionRefusal])
	c.Admission = scanLimJSON(scan.Limited[vocab.Admission])
	return c
}

// loadSummary is the load wave / load flood --json schema.
type loadSummary struct {
	Command           string            `json:"command"` // "wave" or "flood"
	Socket            string            `json:"socket"`
	Wave              *waveJSON         `json:"wave,omitempty"`
	Flood             *floodJSON        `json:"flood,omitempty"`
	Interrupted       bool              `json:"interrupted"`
	Signal            string            `json:"signal"` // "SIGINT", "SIGTERM" or ""
	Target            uint64            `json:"target"`
	Completed         uint64            `json:"completed"`
	Admitted          uint64            `json:"admitted"`
	Throttled         uint64            `json:"throttled"`
	Refused           uint64            `json:"refused"`
	Failed            uint64            `json:"failed"`
	Abandoned         uint64            `json:"abandoned"`
	NotStarted        uint64            `json:"not_started"`
	Requests          uint64            `json:"requests"`
	ElapsedSeconds    float64           `json:"elapsed_seconds"`
	RequestsPerSecond float64           `json:"requests_per_second"`
	MaxRetryAfter     uint64            `json:"max_retry_after_seconds"`
	Pacing            *pacingJSON       `json:"pacing"` // null unless load wave --pace
	LatencyP50Seconds float64           `json:"latency_p50_seconds"`
	LatencyP99Seconds float64           `json:"latency_p99_seconds"`
	ByAnswer          map[string]uint64 `json:"by_answer"`
	FirstError        string            `json:"first_error"`
	TraceID           string            `json:"trace_id"`
	RootSpan          string            `json:"root_span"`    // the span trace_id is rooted at: bringup.wave or load.flood
	Daemon            *daemonJSON       `json:"daemon"`       // null when health could not be read
	DaemonError       string            `json:"daemon_error"` // why, then
	Counted           *countedJSON      `json:"counted_records"`
	// traceEndpoint is where the trace is exported, "" for nowhere.
	traceEndpoint string
}

type waveJSON struct {
	Hosts          int `json:"hosts"`
	ModulesPerHost int `json:"modules_per_host"`
}

// pacingJSON is what load wave --pace cost.
type pacingJSON struct {
	WaitSeconds             float64 `json:"wait_seconds"` // the wave stood still waiting for the bucket to refill
	Waits                   uint64  `json:"waits"`
	AnswersWithoutRateLimit uint64  `json:"answers_without_ratelimit"` // no usable RateLimit field: paced one call at a time
}

type floodJSON struct {
	Bucket   string `json:"bucket"`
	Requests int    `json:"requests"`
}

type daemonJSON struct {
	LimitedPredecisionRefusal uint64 `json:"limited_predecision_refusal"`
	LimitedAdmission          uint64 `json:"limited_admission"`
}

type countedJSON struct {
	Dir                string      `json:"dir"`
	Error              string      `json:"error"`
	PredecisionRefusal scanLimJSON `json:"predecision_refusal"`
	Admission          scanLimJSON `json:"admission"`
}

func (s *loadSummary) fill(socket string, r *loadgen.Report) {
	s.Socket = socket
	s.Interrupted = r.Interrupted
	s.Target, s.Completed = r.Target, r.Done
	s.Admitted, s.Throttled, s.Refused, s.Failed, s.Abandoned = r.Admitted, r.Throttled, r.Refused, r.Failed, r.Abandoned
	s.NotStarted = r.NotStarted()
	s.Requests = r.Requests
	s.ElapsedSeconds = r.Elapsed.Seconds()
	s.RequestsPerSecond = r.Throughput()
	s.MaxRetryAfter = r.MaxRetryAfter
	if p := r.Pacing; p != nil {
		s.Pacing = &pacingJSON{WaitSeconds: p.Wait.Seconds(), Waits: p.Waits, AnswersWithoutRateLimit: p.Uninformed}
	}
	s.LatencyP50Seconds, s.LatencyP99Seconds = r.P50.Seconds(), r.P99.Seconds()
	s.ByAnswer = map[string]uint64{}
	for id, n := range r.ByID {
		s.ByAnswer[string(id)] = n
	}
	if r.FirstError != nil {
		s.FirstError = r.FirstError.Error()
	}
	s.TraceID, s.RootSpan = r.TraceID, r.RootSpan
}

func printSummary(w io.Writer, s *loadSummary) {
	unit := "mints"
	if s.Command == "flood" {
		unit = "requests"
	}
	if s.Interrupted {
		fmt.Fprintf(w, "interrupted: by %s after %.1f s: %d of %d %s completed, %d abandoned while waiting to retry, %d not started\n",
			s.Signal, s.ElapsedSeconds, s.Completed, s.Target, unit, s.Abandoned, s.NotStarted)
	}
	fmt.Fprintf(w, "elapsed:     %.1f s\n", s.ElapsedSeconds)
	fmt.Fprintf(w, "requests:    %d (%.0f/s)\n", s.Requests, s.RequestsPerSecond)
	fmt.Fprintf(w, "admitted:    %d\n", s.Admitted)
	fmt.Fprintf(w, "throttled:   %d (RegistrarBusy answers; max retry_after %d s)\n", s.Throttled, s.MaxRetryAfter)
	if p := s.Pacing; p != nil {
		fmt.Fprintf(w, "paced:       waited %.1f s for the bucket to refill (%d waits)\n", p.WaitSeconds, p.Waits)
		if p.AnswersWithoutRateLimit > 0 {
			fmt.Fprintf(w, "             %d answers carried no usable RateLimit field (the wave went one mint at a time for those)\n", p.AnswersWithoutRateLimit)
		}
	}
	fmt.Fprintf(w, "refused:     %d\n", s.Refused)
	if s.Failed > 0 {
		fmt.Fprintf(w, "failed:      %d (first: %s)\n", s.Failed, s.FirstError)
	}
	p50 := time.Duration(s.LatencyP50Seconds * float64(time.Second)).Round(time.Microsecond)
	p99 := time.Duration(s.LatencyP99Seconds * float64(time.Second)).Round(time.Microsecond)
	fmt.Fprintf(w, "latency:     p50 %v  p99 %v\n", p50, p99)
	if len(s.ByAnswer) > 0 {
		ids := make([]string, 0, len(s.ByAnswer))
		for id := range s.ByAnswer {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		fmt.Fprint(w, "by answer:  ")
		for _, id := range ids {
			fmt.Fprintf(w, " %s=%d", id, s.ByAnswer[id])
		}
		fmt.Fprintln(w)
	}
	if s.TraceID != "" {
		if s.traceEndpoint == "" {
			fmt.Fprintf(w, "trace:       %s (%s), NOT exported: no traces endpoint (set telemetry.otlp_endpoint or otlp_traces_endpoint in --config, OTEL_EXPORTER_OTLP_ENDPOINT, or --otlp-endpoint)\n", s.TraceID, s.RootSpan)
		} else {
			fmt.Fprintf(w, "trace:       %s (%s), exported to %s\n", s.TraceID, s.RootSpan, s.traceEndpoint)
		}
	}
	if d := s.Daemon; d != nil {
		fmt.Fprintf(w, "daemon registrar_health.limiter: limited_predecision_refusal=%d limited_admission=%d\n",
			d.LimitedPredecisionRefusal, d.LimitedAdmission)
	} else {
		fmt.Fprintf(w, "daemon registrar_health: unavailable (%s)\n", s.DaemonError)
	}
	if c := s.Counted; c != nil {
		if c.Error != "" {
			fmt.Fprintf(w, "counted records: none read: %s\n", c.Error)
		} else {
			fmt.Fprintf(w, "counted records in %s (windows still open are written at their deadline or at shutdown):\n", c.Dir)
			fmt.Fprintf(w, "  %-20s records=%d count=%d\n", vocab.PredecisionRefusal.String(), c.PredecisionRefusal.Records, c.PredecisionRefusal.Count)
			fmt.Fprintf(w, "  %-20s records=%d count=%d\n", vocab.Admission.String(), c.Admission.Records, c.Admission.Count)
		}
	}
}
