package main

import (
	"bytes"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serveFixed answers every request on a fresh unix socket with status and
// body, and returns the socket's path.
func serveFixed(t *testing.T, status int, body string) string {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return path
}

const clientHealth = `"registrar_health":{"limiter":{"limited_predecision_refusal":2,"limited_admission":0},"audit_capacity":{"state":"low","free_bytes":104857600,"store_bytes":41943040,"budget_bytes":142606336,"append_failures":0},"certificates":{"soon":1}}`

func TestMintAndDeregisterShowAuditCapacity(t *testing.T) {
	mintBody := `{"protocol_version":1,"request_id":"r.1","registration_id":"h1-review-001","outcome":"first_mint","material":{"role_id":"r","wrapped_secret_id":"w","expires_at":"2026-12-01T12:05:00.123Z"},` + clientHealth + "}\n"
	sock := serveFixed(t, 200, mintBody)
	args := []string{"--socket", sock, "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}
	wantLine := "audit_capacity: state=low free_bytes=104857600 store_bytes=41943040 budget_bytes=142606336 append_failures=0"

	var out, errb bytes.Buffer
	if code := runMint(args, &out, &errb); code != exitOK || !strings.Contains(out.String(), wantLine) {
		t.Fatalf("mint: exit %d, stdout %q, stderr %q; want %q", code, out.String(), errb.String(), wantLine)
	}
	out.Reset()
	if code := runMint(append(args, "--json"), &out, &errb); code != exitOK || out.String() != mintBody {
		t.Fatalf("mint --json: exit %d, stdout %q, want the body unchanged (audit_capacity and the unknown member included)", code, out.String())
	}

	refusal := `{"protocol_version":1,"request_id":"r.2","class":"permanent","error":{"id":"RegistrarUnavailable","reason":"AuditUnwritable"},` +
		strings.Replace(clientHealth, `"state":"low"`, `"state":"unwritable"`, 1) + "}\n"
	sock = serveFixed(t, 503, refusal)
	out.Reset()
	errb.Reset()
	code := runDeregister([]string{"--socket", sock, "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}, &out, &errb)
	if code != exitPermanent || !strings.Contains(errb.String(), "RegistrarUnavailable: AuditUnwritable") || !strings.Contains(errb.String(), "audit_capacity: state=unwritable") {
		t.Fatalf("deregister refused: exit %d, stderr %q", code, errb.String())
	}
}

func TestAnAnswerAfterAnUncleanStopShowsTheRestartLine(t *testing.T) {
	h := strings.Replace(clientHealth, `"certificates":{"soon":1}`, `"restart":{"unclean":true,"checkpoint":"stale","evidence_gap_from":"2026-12-01T10:04:59.950Z","evidence_gap_to":"2026-12-01T10:05:00.412Z","recovered_records":3,"recovered_count":40}`, 1)
	args := []string{"--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}
	body := `{"protocol_version":1,"request_id":"r.1","registration_id":"h1-review-001","outcome":"first_mint","material":{"role_id":"r","wrapped_secret_id":"w","expires_at":"2026-12-01T12:05:00.123Z"},` + h + "}\n"
	var out, errb bytes.Buffer
	if code := runMint(append([]string{"--socket", serveFixed(t, 200, body)}, args...), &out, &errb); code != exitOK {
		t.Fatalf("mint: exit %d, stderr %q", code, errb.String())
	}
	want := "restart: unclean checkpoint=stale evidence_gap_from=2026-12-01T10:04:59.950Z evidence_gap_to=2026-12-01T10:05:00.412Z recovered_records=3 recovered_count=40"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("stdout %q lacks %q", out.String(), want)
	}
	// A clean start prints no restart line.
	out.Reset()
	runMint(append([]string{"--socket", serveFixed(t, 200, strings.Replace(body, `"unclean":true`, `"unclean":false`, 1))}, args...), &out, &errb)
	if strings.Contains(out.String(), "restart:") {
		t.Fatalf("a clean start printed a restart line: %q", out.String())
	}
}

const busyBody = `{"protocol_version":1,"request_id":"r.1","class":"retryable","error":{"id":"RegistrarBusy","retry_after":7},` + clientHealth + "}\n"

// TestRegistrarBusyExits75 holds the documented exit status of a
// retryable answer (EX_TEMPFAIL, 75) for both verbs, with and without
// --json: the literal, not only the constant the docs test compares.
func TestRegistrarBusyExits75(t *testing.T) {
	sock := serveFixed(t, 429, busyBody)
	args := []string{"--socket", sock, "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}
	for _, tc := range []struct {
		name string
		run  func([]string, *bytes.Buffer, *bytes.Buffer) int
	}{
		{"mint", func(a []string, o, e *bytes.Buffer) int { return runMint(a, o, e) }},
		{"deregister", func(a []string, o, e *bytes.Buffer) int { return runDeregister(a, o, e) }},
	} {
		for _, extra := range [][]string{nil, {"--json"}} {
			var out, errb bytes.Buffer
			code := tc.run(append(append([]string(nil), args...), extra...), &out, &errb)
			if code != 75 {
				t.Errorf("%s %v on RegistrarBusy: exit %d, want 75; stderr %q", tc.name, extra, code, errb.String())
			}
			if extra == nil && !strings.Contains(errb.String(), "retry after 7 s") {
				t.Errorf("%s: stderr %q, want the retry_after", tc.name, errb.String())
			}
		}
	}
}
