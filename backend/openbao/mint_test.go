package openbao_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// faultTimeout is openbao.request_timeout_ms in the fault tests: short,
// so a held answer times out quickly, and far above a loopback round trip
// to a dev server even on a loaded machine under the race detector.
const faultTimeout = 500 * time.Millisecond

// answerMargin is the documented margin (docs/en/openbao.md#failures): a
// mint whose server stops answering one request answers the caller within
// openbao.request_timeout_ms plus this. It covers the mint's other
// requests, each a round trip to a server that answers, and the records.
const answerMargin = time.Second

// faultEnv is a dev server behind a vaulttest.Proxy, a backend on the
// proxy with its metrics, and the real verbs over it with an in-memory
// audit log and their metrics.
type faultEnv struct {
	*env // state and inventory; its px is unused (nil)
	fp   *vaulttest.Proxy
	rd   *sdkmetric.ManualReader
	v    *registrar.Verbs
	log  *audittest.AuditLog
}

func newFaultEnv(t *testing.T, timeout time.Duration) *faultEnv {
	t.Helper()
	srv := vaulttest.StartDev(t)
	fp := vaulttest.NewProxy(t, srv.Addr)
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	obs, err := telemetry.NewOpenBaoObserver(mp)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	b, err := openbao.New(openbao.Options{
		Address: fp.URL, Token: srv.RootToken, KVPrefix: testPrefix, RequestTimeout: timeout,
		SecretIDTTL: time.Hour, SecretIDNumUses: 1, MaxInFlight: testMaxInFlight,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Observer: obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	vobs, err := telemetry.NewVerbObserver(mp, nil) // the duration histogram is not read here
	if err != nil {
		t.Fatal(err)
	}
	h := newVerbsDeps(t, 1024, registrar.Deps{Backend: b, Observer: vobs})
	e := &env{srv: srv, b: b, root: srv.Client(), logs: logs, token: srv.RootToken, timeout: timeout}
	return &faultEnv{env: e, fp: fp, rd: rd, v: h.v, log: h.log}
}

// counters returns the backend's errors by "operation/kind" and the
// verbs' partial failures of mint.
func (f *faultEnv) counters(t *testing.T) (errs map[string]int64, partial int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	errs = map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case telemetry.BackendRequestErrors:
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					op, _ := dp.Attributes.Value("operation")
					kind, _ := dp.Attributes.Value("kind")
					errs[op.AsString()+"/"+kind.AsString()] += dp.Value
				}
			case telemetry.RegistrarBackendPartial:
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					if v, _ := dp.Attributes.Value("verb"); v.AsString() == "mint" {
						partial += dp.Value
					}
				}
			}
		}
	}
	return errs, partial
}

// records returns the audit records of one invocation.
func (f *faultEnv) records(id string) []audit.Record {
	var out []audit.Record
	for _, r := range f.log.Records() {
		if r.RequestID == id {
			out = append(out, r)
		}
	}
	return out
}

func registrationID(instance uint32) string { return fmt.Sprintf("h1-review-%03d", instance) }

// cleanMint mints instance through the proxy with no fault and returns the
// requests the backend made: the steps of a first mint as the backend
// actually makes them today, with the registration id in their paths.
func (f *faultEnv) cleanMint(t *testing.T, instance uint32) (state, []vaulttest.Request) {
	t.Helper()
	before := f.fp.Count()
	res, err := f.v.Mint(context.Background(), mintRequest("h1", instance))
	if err != nil || res.Outcome != registrar.FirstMint || res.RegistrationID != registrationID(instance) {
		t.Fatalf("clean mint: %v of %s, %v; want first_mint of %s", res.Outcome, res.RegistrationID, err, registrationID(instance))
	}
	steps := f.fp.Requests()[before:]
	if len(steps) < 2 {
		t.Fatalf("a clean first mint made %d requests: %v", len(steps), steps)
	}
	return f.state(t, res.RegistrationID), steps
}

// faultCase is one fault on one step of a mint.
type faultCase struct {
	fault vaulttest.Fault
	hold  time.Duration
	// kind and status are the RequestError the mint fails with.
	kind   openbao.Kind
	status int
}

// applied reports whether the server applies the failed request.
func (c faultCase) applied() bool { return c.fault != vaulttest.Fail500 }

var stepFaults = []faultCase{
	{fault: vaulttest.Fail500, kind: openbao.KindServer, status: 500},
	{fault: vaulttest.Fail500Applied, kind: openbao.KindServer, status: 500},
	// The answer held ten times the timeout: the client gives up at
	// request_timeout_ms. A backend that ignored its timeout would wait
	// for the answer, past the bound the test checks.
	{fault: vaulttest.Delay, hold: 10 * faultTimeout, kind: openbao.KindTimeout},
	// Applied, and the connection closed without an answer.
	{fault: vaulttest.Drop, kind: openbao.KindTransport},
}

// For every step of a first mint, as the backend makes them (read off a
// clean mint through the proxy, so a change of the steps changes the
// cases), and for each fault — 500 not applied, 500 after the server
// applied it, an answer held past request_timeout_ms, a dropped connection
// — the mint through the verbs:
//   - answers RegistrarUnavailable / BackendUnavailable with the step's
//     *RequestError of the right kind, within request_timeout_ms plus the
//     documented margin, and makes no request after the failed one;
//   - records its intent and a refused backend_unavailable outcome, partial
//     exactly when a state-changing request was made, "(maybe)" when the
//     failed one was state-changing;
//   - counts one error of that operation and kind, and one partial mint
//     when the record is partial;
//   - leaves the server holding nothing for the id when no state-changing
//     request reached it, else a binding, and never a policy or role
//     without a binding; every step the record names as certainly done is
//     on the server;
//
// and the retry of the same request completes it: first_mint, the first
// one never finished, unless the failed request was the last one and the
// server applied it (then idempotent_remint), with the role, its role id
// and an active binding on the server.
func TestAFaultOnEachStepOfAMintIsRecordedCountedAndRetriedToCompletion(t *testing.T) {
	f := newFaultEnv(t, faultTimeout)
	clean, steps := f.cleanMint(t, 1)
	cleanID := registrationID(1)
	t.Logf("a first mint makes %d requests: %v", len(steps), steps)
	instance := uint32(1)
	var slowest time.Duration
	for _, fc := range stepFaults {
		for i, step := range steps {
			instance++
			t.Run(fmt.Sprintf("%s/%d-%s", fc.fault, i, step.Method), func(t *testing.T) {
				elapsed := f.failStep(t, instance, fc, steps, i, state{}, clean, cleanID)
				slowest = max(slowest, elapsed)
				if fc.fault == vaulttest.Delay {
					t.Logf("%s %s: answered after %s (timeout %s)", step.Method, registrationID(instance), elapsed.Round(time.Millisecond), faultTimeout)
				}
			})
		}
	}
	t.Logf("slowest failed mint answered after %s (bound %s)", slowest.Round(time.Millisecond), faultTimeout+answerMargin)
	// Nothing anywhere on the server is an orphan.
	inv := f.inventory(t)
	for _, p := range slices.Concat(inv.policies, inv.roles) {
		if !slices.Contains(inv.bindings, p) {
			t.Errorf("%s has a policy or role and no binding: %+v", p, inv)
		}
	}
}

// failStep runs one mint of instance with fault fc on its i-th request
// (steps are a clean mint's, of cleanID) and its retry, and checks both.
// pre is what the server held for the id before (the zero state for a
// first mint); clean what a clean mint leaves.
func (f *faultEnv) failStep(t *testing.T, instance uint32, fc faultCase, steps []vaulttest.Request, i int, pre, clean state, cleanID string) time.Duration {
	remint := pre.binding != nil
	ctx := context.Background()
	id := registrationID(instance)
	target := vaulttest.Request{Method: steps[i].Method, Path: strings.ReplaceAll(steps[i].Path, cleanID, id)}
	nth := 0
	for _, s := range steps[:i+1] {
		if s == steps[i] {
			nth++
		}
	}
	if fc.fault == vaulttest.Drop && target.Method == "GET" {
		// net/http replays a GET whose reused connection closed: drop the
		// replay too, so the read fails as it would on a dead network.
		nth = 0
	}
	in := f.fp.Add(vaulttest.Rule{Method: target.Method, Path: target.Path, Nth: nth, Fault: fc.fault, Hold: fc.hold})
	defer f.fp.Reset()
	errsBefore, partialBefore := f.counters(t)
	before := f.fp.Count()

	start := time.Now()
	_, err := f.v.Mint(ctx, mintRequest("h1", instance))
	elapsed := time.Since(start)

	// When the answer came, and what it was.
	if bound := f.timeout + answerMargin; elapsed > bound {
		t.Errorf("answered after %s, want within request_timeout_ms + margin = %s", elapsed, bound)
	}
	if fc.kind == openbao.KindTimeout && elapsed < f.timeout {
		t.Errorf("a timeout answered after %s, before request_timeout_ms %s", elapsed, f.timeout)
	}
	ue, ok := errors.AsType[*registrar.UnavailableError](err)
	if !ok || ue.Reason != registrar.BackendUnavailable {
		t.Fatalf("mint with %s on %s: %v, want RegistrarUnavailable BackendUnavailable", fc.fault, target, err)
	}
	re, ok := errors.AsType[*openbao.RequestError](err)
	if !ok || re.Kind != fc.kind || re.Status != fc.status {
		t.Fatalf("cause %v, want a %s (status %d)", err, fc.kind, fc.status)
	}
	select {
	case <-in.Fired():
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy never applied %s to %s", fc.fault, target)
	}

	// The requests: the steps up to the failed one, and nothing after.
	made := slices.Compact(f.fp.Requests()[before:])
	want := make([]vaulttest.Request, i+1)
	for j, s := range steps[:i+1] {
		want[j] = vaulttest.Request{Method: s.Method, Path: strings.ReplaceAll(s.Path, cleanID, id)}
	}
	if !slices.Equal(made, want) {
		t.Errorf("the failed mint made %v, want %v", made, want)
	}

	// The records.
	// The list of secret ids and its unwrap change nothing on the
	// registry (the unwrap uses up the list's own wrapping token).
	changing := func(r vaulttest.Request) bool {
		return r.Method != "GET" && r.Method != "LIST" && !strings.HasSuffix(r.Path, "/sys/wrapping/unwrap")
	}
	wantPartial := slices.ContainsFunc(steps[:i+1], changing)
	recs := f.records(ue.RequestID)
	if len(recs) != 2 || recs[0].Phase != audit.PhaseIntent || recs[1].Phase != audit.PhaseOutcome {
		t.Fatalf("records of the failed mint: %+v, want an intent and an outcome", recs)
	}
	o := recs[1].Outcome
	if o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonBackendUnavailable {
		t.Errorf("outcome %+v, want refused backend_unavailable", o)
	}
	partial := strings.HasPrefix(o.Detail, "partial:")
	if partial != wantPartial {
		t.Errorf("outcome detail %q: partial = %v, want %v", o.Detail, partial, wantPartial)
	}
	if changing(steps[i]) && !strings.Contains(o.Detail, "(maybe)") {
		t.Errorf("outcome detail %q does not mark the failed state-changing step (maybe)", o.Detail)
	}
	if !strings.Contains(o.Detail, re.Op.String()) {
		t.Errorf("outcome detail %q does not name the failed operation %s", o.Detail, re.Op)
	}

	// The metrics.
	errsAfter, partialAfter := f.counters(t)
	key := re.Op.String() + "/" + fc.kind.String()
	for k, n := range errsAfter {
		if d := n - errsBefore[k]; (k == key && d != 1) || (k != key && d != 0) {
			t.Errorf("errors{%s} grew by %d, want %d", k, d, map[bool]int{true: 1}[k == key])
		}
	}
	if _, ok := errsAfter[key]; !ok {
		t.Errorf("errors{%s} not counted: %v", key, errsAfter)
	}
	if d, w := partialAfter-partialBefore, map[bool]int64{true: 1}[wantPartial]; d != w {
		t.Errorf("registrar.backend.partial{mint} grew by %d, want %d", d, w)
	}

	// The server.
	s := f.state(t, id)
	reached := slices.ContainsFunc(steps[:i], changing) || (changing(steps[i]) && fc.applied())
	if s.binding == nil && (s.policy != "" || s.role != nil) {
		t.Errorf("an orphan: a policy or role without a binding: %+v", s)
	}
	unchanged := s.version == pre.version && s.policy == pre.policy && (s.role == nil) == (pre.role == nil) && s.roleID == pre.roleID
	if !reached && !unchanged {
		t.Errorf("no state-changing request reached the server, yet it holds %+v, not what it held before (%+v)", s, pre)
	}
	if reached && s.binding == nil {
		t.Errorf("a state-changing request reached the server and it holds no binding: %+v", s)
	}
	if !partial && !unchanged {
		t.Errorf("a clean refusal, yet the server holds %+v, not what it held before (%+v)", s, pre)
	}
	for step, held := range map[string]bool{"binding claimed": s.binding != nil, "policy written": s.policy != "", "role written": s.role != nil} {
		if certain := strings.Contains(o.Detail, step+",") || strings.Contains(o.Detail, step+";"); certain && !held {
			t.Errorf("the record says %q, the server does not hold it: %+v", step, s)
		}
	}

	// The retry completes it.
	f.fp.Reset()
	res, err := f.v.Mint(ctx, mintRequest("h1", instance))
	wantOutcome := registrar.FirstMint
	if remint || (i == len(steps)-1 && fc.applied()) {
		wantOutcome = registrar.IdempotentRemint
	}
	if err != nil || res.Outcome != wantOutcome || res.Material.WrappedSecretID == "" {
		t.Fatalf("retry: %v (material %v), %v; want %v with material", res.Outcome, res.Material.WrappedSecretID != "", err, wantOutcome)
	}
	if recs := f.records(res.RequestID); len(recs) != 2 || recs[1].Outcome == nil || recs[1].Outcome.Class != wantOutcome.AuditClass() {
		t.Errorf("records of the retry: %+v, want an intent and a %v outcome", recs, wantOutcome)
	}
	s = f.state(t, id)
	if s.binding["state"] != "active" || s.role == nil || s.roleID != res.Material.RoleID || (s.policy != "") != (clean.policy != "") {
		t.Errorf("after the retry the server holds %+v, want what a clean mint leaves (%+v)", s, clean)
	}
	if remint && s.roleID != pre.roleID {
		t.Errorf("the remint changed the role id")
	}
	// Secret ids: the retry's alone. One the failed attempt issued and
	// could not record in the binding (its wrapping token discarded or
	// lost with the answer), and the previous one a remint replaces, are
	// destroyed by the retry, which lists them all.
	if n := f.liveSecretIDs(t, id); n != 1 {
		t.Errorf("after the retry the role has %d live secret ids, want 1 (the retry's)", n)
	}
	return elapsed
}

// liveSecretIDs counts the secret id accessors the server lists for the
// id's role.
func (f *faultEnv) liveSecretIDs(t *testing.T, id string) int {
	t.Helper()
	s, err := f.root.Logical().List("auth/approle/role/" + openbao.RoleName(id) + "/secret-id")
	if err != nil {
		t.Fatalf("listing the secret ids of %s: %v", id, err)
	}
	if s == nil {
		return 0
	}
	keys, _ := s.Data["keys"].([]any)
	return len(keys)
}

// The same for every step of a remint (read off a clean remint): the
// answer, records, metrics and server agree, the role id never changes,
// and the retry is an idempotent_remint that leaves one live secret id.
func TestAFaultOnEachStepOfARemintIsRecordedCountedAndRetriedToCompletion(t *testing.T) {
	f := newFaultEnv(t, faultTimeout)
	_, _ = f.cleanMint(t, 1)
	cleanID := registrationID(1)
	before := f.fp.Count()
	res, err := f.v.Mint(context.Background(), mintRequest("h1", 1))
	if err != nil || res.Outcome != registrar.IdempotentRemint {
		t.Fatalf("clean remint: %v, %v", res.Outcome, err)
	}
	steps := f.fp.Requests()[before:]
	clean := f.state(t, cleanID)
	t.Logf("a remint makes %d requests: %v", len(steps), steps)
	instance := uint32(1)
	for _, fc := range stepFaults {
		for i, step := range steps {
			instance++
			t.Run(fmt.Sprintf("%s/%d-%s", fc.fault, i, step.Method), func(t *testing.T) {
				f.cleanMint(t, instance)
				pre := f.state(t, registrationID(instance))
				elapsed := f.failStep(t, instance, fc, steps, i, pre, clean, cleanID)
				if fc.fault == vaulttest.Delay {
					t.Logf("%s %s: answered after %s (timeout %s)", step.Method, registrationID(instance), elapsed.Round(time.Millisecond), faultTimeout)
				}
			})
		}
	}
}

// errorCount sums registrar.backend.request.errors{kind} over operations.
func errorCount(t *testing.T, reader *sdkmetric.ManualReader, kind string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "registrar.backend.request.errors" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if k, _ := dp.Attributes.Value("kind"); k.AsString() == kind {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// lastOutcome is the outcome record of the invocation with request id id.
func lastOutcome(t *testing.T, h *verbsHarness, id string) *audit.Outcome {
	t.Helper()
	for _, r := range h.log.Records() {
		if r.Phase == audit.PhaseOutcome && r.RequestID == id {
			return r.Outcome
		}
	}
	t.Fatalf("no outcome recorded for %s", id)
	return nil
}

// A sealed server: every mint answers RegistrarUnavailable
// BackendUnavailable (the wire's 503), its refused backend_unavailable
// outcome is recorded as a clean refusal (the first request, the binding
// read, failed: nothing was half-made), the errors metric counts
// server_error, and the server holds nothing for the id. Unsealing recovers
// without a new backend: the same mint is the first mint.
func TestASealedServerRefusesEveryMintCleanlyAndUnsealRecovers(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := newEnv(t, envOptions{persistent: true, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	h := newVerbs(t, e.b, 64, nil)
	ctx := context.Background()
	e.srv.Seal()
	for i := range 3 {
		_, err := h.v.Mint(ctx, mintRequest("h1", 1))
		ue, ok := errors.AsType[*registrar.UnavailableError](err)
		if !ok || ue.Reason != registrar.BackendUnavailable {
			t.Fatalf("mint %d on a sealed server: %v, want RegistrarUnavailable BackendUnavailable", i, err)
		}
		if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindServer || re.Status != 503 {
			t.Errorf("mint %d: cause %v, want a 503 server_error", i, err)
		}
		o := lastOutcome(t, h, ue.RequestID)
		if o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonBackendUnavailable || strings.HasPrefix(o.Detail, "partial:") {
			t.Errorf("mint %d: outcome %+v, want a clean refused backend_unavailable", i, o)
		}
	}
	if got := errorCount(t, reader, "server_error"); got != 3 {
		t.Errorf("errors{kind=server_error} = %d, want 3", got)
	}
	e.srv.Unseal()
	if inv := e.inventory(t); len(inv.policies)+len(inv.roles)+len(inv.bindings) != 0 {
		t.Errorf("after the sealed mints the server holds %+v, want nothing", inv)
	}
	res, err := h.v.Mint(ctx, mintRequest("h1", 1))
	if err != nil || res.Outcome != registrar.FirstMint {
		t.Fatalf("after unseal: %+v, %v; want first_mint", res, err)
	}
	if inv := e.inventory(t); len(inv.policies) != 0 || len(inv.roles) != 1 || len(inv.bindings) != 1 {
		t.Errorf("after unseal the server holds %+v, want one role and binding, and no policy", inv)
	}
}

// The token's policy removed: a mint fails client_error (403), recorded as
// a clean refusal (the binding read was refused) and counted, and nothing is
// made; restoring the policy recovers.
func TestATokenThatLostItsPolicyFailsAsClientError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := newEnv(t, envOptions{
		tokenPolicy: documentedPolicy,
		mp:          sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	h := newVerbs(t, e.b, 64, nil)
	ctx := context.Background()
	policy, err := e.root.Sys().GetPolicy("registrar-otel")
	if err != nil || policy == "" {
		t.Fatalf("reading the token's policy: %q, %v", policy, err)
	}
	if err := e.root.Sys().DeletePolicy("registrar-otel"); err != nil {
		t.Fatal(err)
	}
	_, err = h.v.Mint(ctx, mintRequest("h1", 1))
	ue, ok := errors.AsType[*registrar.UnavailableError](err)
	if !ok || ue.Reason != registrar.BackendUnavailable {
		t.Fatalf("mint without the policy: %v, want RegistrarUnavailable BackendUnavailable", err)
	}
	if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindClient || re.Status != 403 {
		t.Errorf("cause %v, want a 403 client_error", err)
	}
	if o := lastOutcome(t, h, ue.RequestID); o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonBackendUnavailable || strings.HasPrefix(o.Detail, "partial:") {
		t.Errorf("outcome %+v, want a clean refused backend_unavailable", o)
	}
	if got := errorCount(t, reader, "client_error"); got != 1 {
		t.Errorf("errors{kind=client_error} = %d, want 1", got)
	}
	if inv := e.inventory(t); len(inv.policies)+len(inv.roles)+len(inv.bindings) != 0 {
		t.Errorf("the server holds %+v, want nothing", inv)
	}
	if err := e.root.Sys().PutPolicy("registrar-otel", policy); err != nil {
		t.Fatal(err)
	}
	if res, err := h.v.Mint(ctx, mintRequest("h1", 1)); err != nil || res.Outcome != registrar.FirstMint {
		t.Errorf("after the policy is restored: %+v, %v; want first_mint", res, err)
	}
}

func TestMintRefusesOperationsTheVerbsNeverSend(t *testing.T) {
	b := newTestBackend(t)
	good := registrar.MintOp{RegistrationID: "h1-review-001", Host: "h1", Spec: registrar.Spec{ServiceName: "review"}, WrapTTL: time.Minute, Now: time.Unix(1, 0)}
	for name, mut := range map[string]func(*registrar.MintOp){
		"empty id":        func(o *registrar.MintOp) { o.RegistrationID = "" },
		"path in id":      func(o *registrar.MintOp) { o.RegistrationID = "../sys" },
		"quote in name":   func(o *registrar.MintOp) { o.Spec.ServiceName = `a"b` },
		"sub-second TTL":  func(o *registrar.MintOp) { o.WrapTTL = time.Millisecond },
		"zero Now":        func(o *registrar.MintOp) { o.Now = time.Time{} },
		"empty host":      func(o *registrar.MintOp) { o.Host = "" },
		"upper-case name": func(o *registrar.MintOp) { o.Spec.ServiceName = "Review" },
	} {
		op := good
		mut(&op)
		if _, _, err := b.Mint(context.Background(), op); !errors.Is(err, openbao.ErrInvalidOp) {
			t.Errorf("%s: Mint = %v, want ErrInvalidOp", name, err)
		}
	}
	if _, err := b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: "a/b", Host: "h1"}); !errors.Is(err, openbao.ErrInvalidOp) {
		t.Errorf("Deregister of a path = %v, want ErrInvalidOp", err)
	}
	b.Close()
	if _, _, err := b.Mint(context.Background(), good); !errors.Is(err, openbao.ErrClosed) {
		t.Errorf("Mint after Close = %v, want ErrClosed", err)
	}
}

// One second is the shortest wrap TTL the verbs admit (wrap_ttl_seconds
// = 1), so the backend mints with it rather than refusing it as under a
// second; a hair under a second is refused before any request.
func TestAOneSecondWrapTTLIsMintedAndAnythingShorterRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h1-review-003", "h1", "review")
	op.WrapTTL = time.Second - time.Nanosecond
	if _, _, err := e.b.Mint(ctx, op); !errors.Is(err, openbao.ErrInvalidOp) {
		t.Fatalf("Mint with a wrap TTL of 1s-1ns = %v, want ErrInvalidOp", err)
	}
	if s := e.state(t, op.RegistrationID); s.binding != nil || s.role != nil {
		t.Fatalf("the refused mint wrote the binding %v and the role %v", s.binding, s.role)
	}
	op.WrapTTL = time.Second
	status, mat, err := e.b.Mint(ctx, op)
	if err != nil || status != registrar.MintCreated {
		t.Fatalf("Mint with a wrap TTL of 1s = %v, %v; want MintCreated", status, err)
	}
	if mat.WrappedSecretID == "" || !mat.ExpiresAt.Equal(testNow.Add(time.Second)) {
		t.Errorf("material = %+v, want a wrapped secret id expiring at Now+1s", mat)
	}
}
