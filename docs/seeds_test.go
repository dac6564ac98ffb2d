package docs

// The seed criteria the documentation must meet in both languages, held by
// tests that read the prose itself (not only its headings): what the two
// buckets' isolation guarantees and what it does not, the coalescing
// window, the counted record, and what "throttled" means against
// "limited". Each claim is a phrase per language; a test names the claim
// that a page no longer states.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// seedLangs are the languages every claim is checked in.
var seedLangs = []string{"en", "ko"}

// claim is one thing a section must say, with its wording in each
// language. Lines wrap anywhere, so the phrases are matched with white
// space folded.
type claim struct {
	what   string
	phrase map[string]string
}

var seedHeading = regexp.MustCompile(`^(#{1,6})\s+.*\{#([^}\s]+)\}\s*$`)

// seedSection returns the section of docs/<lang>/<name> whose heading
// carries {#anchor}, up to the next heading of the same or a higher level
// (outside code fences), with white space folded to single spaces.
func seedSection(t *testing.T, lang, name, anchor string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(lang, name))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out           []string
		level         int
		inside, fence bool
	)
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = !fence
		}
		if m := seedHeading.FindStringSubmatch(line); m != nil && !fence {
			switch {
			case m[2] == anchor:
				inside, level = true, len(m[1])
			case inside && len(m[1]) <= level:
				return strings.Join(strings.Fields(strings.Join(out, "\n")), " ")
			}
		}
		if inside {
			out = append(out, line)
		}
	}
	if !inside {
		t.Fatalf("%s/%s has no heading {#%s}", lang, name, anchor)
	}
	return strings.Join(strings.Fields(strings.Join(out, "\n")), " ")
}

// checkClaims fails for every claim the section #anchor of name does not
// state, in each language.
func checkClaims(t *testing.T, name, anchor string, claims []claim) {
	t.Helper()
	for _, lang := range seedLangs {
		text := seedSection(t, lang, name, anchor)
		for _, c := range claims {
			p, ok := c.phrase[lang]
			if !ok {
				t.Fatalf("claim %q has no %s phrase", c.what, lang)
			}
			if !strings.Contains(text, p) {
				t.Errorf("%s/%s#%s no longer states %s: want %q", lang, name, anchor, c.what, p)
			}
		}
	}
}

// TestIsolationStatesWhatItGuaranteesAndWhatItDoesNot: the isolation the
// two buckets buy (a pre-derivation refusal flood cannot starve legitimate
// mints) and its stated limit (well-formed, derivable requests that end in
// refusal spend admission budget, bounded by the attacker's cost, not
// isolated, because the outcome is unknown before the intent write).
func TestIsolationStatesWhatItGuaranteesAndWhatItDoesNot(t *testing.T) {
	checkClaims(t, "operations.md", "isolation", []claim{
		{"the guarantee's heading", map[string]string{
			"en": "**Guaranteed:**", "ko": "**보장하는 것:**"}},
		{"that a pre-derivation refusal flood cannot starve legitimate mints", map[string]string{
			"en": "a flood of requests that fail the pre-derivation checks cannot starve legitimate mints",
			"ko": "사전 도출 검사에 실패하는 요청의 폭주는 정상 mint를 굶길 수 없습니다"}},
		{"that the flood spends only predecision_refusal and leaves admission untouched", map[string]string{
			"en": "That flood spends only the `predecision_refusal` bucket; the `admission` bucket of the same identity is untouched",
			"ko": "`predecision_refusal` 버킷만 소모하고, 같은 아이덴티티의 `admission` 버킷은 건드리지 않습니다"}},
		{"that this flood is free for the attacker", map[string]string{
			"en": "free for the attacker: no valid input, no backend cost",
			"ko": "공격자에게 공짜이기 때문입니다. 유효한 입력도, 백엔드 비용도 필요 없고"}},
		{"what isolation does not guarantee, as its own part", map[string]string{
			"en": "**Not guaranteed:**", "ko": "**보장하지 않는 것:**"}},
		{"that well-formed, derivable requests ending in refusal spend admission budget", map[string]string{
			"en": "a caller that can send well-formed, derivable requests can spend the admission budget with requests that end in a refusal after derivation",
			"ko": "형식이 올바르고 도출 가능한 요청을 보낼 수 있는 호출자는, 도출 이후에 거부로 끝나는 요청(등록 ID 충돌, 저장된 spec 충돌, 호스트 불일치)으로 admission 예산을 소모할 수 있습니다"}},
		{"that such requests can get legitimate mints throttled", map[string]string{
			"en": "can, in turn, get legitimate mints of the same identity throttled",
			"ko": "같은 아이덴티티의 정상 mint가 스로틀될 수 있습니다"}},
		{"that this path is bounded by the attacker's cost, not isolated", map[string]string{
			"en": "That path is bounded by the attacker's cost (every attempt costs backend work as well as a token), not isolated",
			"ko": "이 경로는 격리되지 않으며, 공격자의 비용(시도마다 토큰과 함께 백엔드 작업이 듭니다)으로 제한될 뿐입니다"}},
		{"why it cannot be bounded more tightly (the outcome comes after the intent write)", map[string]string{
			"en": "Bounding it more tightly would need the outcome before the intent record is written",
			"ko": "이를 더 좁게 제한하려면 intent 레코드를 쓰기 전에 결과를 알아야 하는데"}},
	})
}

// TestThrottledMeansLimitedAtAdmission: "limited" (records suppressed, at
// either check point) and "throttled" (limited at admission, answered the
// retryable RegistrarBusy) are defined apart, every throttled invocation
// is limited and not the reverse; and the callers' table answers a limited
// pre-derivation refusal with its permanent identifier, a throttled one
// with RegistrarBusy.
func TestThrottledMeansLimitedAtAdmission(t *testing.T) {
	checkClaims(t, "operations.md", "limited-and-throttled", []claim{
		{"limited as records suppressed", map[string]string{
			"en": "**limited**: the limiter suppressed the invocation's audit records",
			"ko": "**limited(제한됨)**: 리미터가 호출의 감사 레코드를 억제했음"}},
		{"that limiting happens at both check points", map[string]string{
			"en": "This happens at *both* check points",
			"ko": "*두* 검사 지점 모두에서 일어납니다"}},
		{"throttled as limited at the admission check point, answered the retryable RegistrarBusy", map[string]string{
			"en": "**throttled**: limited at the *admission* check point, and therefore answered with the retryable `RegistrarBusy`",
			"ko": "**throttled(스로틀됨)**: *admission* 검사 지점에서 제한되어, 재시도 가능한 `RegistrarBusy`로 응답받음"}},
		{"that every throttled invocation is limited and a limited pre-derivation one is not throttled", map[string]string{
			"en": "Every throttled invocation is limited; a limited pre-derivation invocation is **not** throttled",
			"ko": "스로틀된 호출은 모두 제한된 호출이지만, 제한된 사전 도출 호출은 스로틀된 것이 **아닙니다**"}},
	})
	for _, lang := range seedLangs {
		table := seedSection(t, lang, "operations.md", "what-callers-see")
		var limited, throttled string
		for _, row := range strings.Split(table, "| |") {
			switch {
			case strings.Contains(row, "(**limited**)"):
				limited = row
			case strings.Contains(row, "(**throttled**)"):
				throttled = row
			}
		}
		if !strings.Contains(limited, "`predecision_refusal`") || !strings.Contains(limited, "| permanent |") || strings.Contains(limited, "RegistrarBusy") {
			t.Errorf("%s/operations.md#what-callers-see: the limited row must be the predecision_refusal bucket, permanent, without RegistrarBusy; got %q", lang, limited)
		}
		if !strings.Contains(throttled, "`admission`") || !strings.Contains(throttled, "`RegistrarBusy`") || !strings.Contains(throttled, "| retryable |") || !strings.Contains(throttled, "| 429 |") {
			t.Errorf("%s/operations.md#what-callers-see: the throttled row must be the admission bucket, RegistrarBusy, retryable, 429; got %q", lang, throttled)
		}
	}
}

// TestCoalescingWindowIsStated: every limited invocation is counted, one
// window per (caller identity, verb, limited_bucket) of
// rate_limit_coalesce_window_seconds (default 60), never keyed on the
// refusal reason, written as one counted record on the first tick past
// its deadline with window_end at the deadline, and flushed on shutdown.
func TestCoalescingWindowIsStated(t *testing.T) {
	checkClaims(t, "operations.md", "coalescing", []claim{
		{"that every limited invocation, at either check point, is counted", map[string]string{
			"en": "every limited invocation, at either check point, is counted",
			"ko": "두 검사 지점 어디에서든 제한된 호출은 모두 집계됩니다"}},
		{"the window's key", map[string]string{
			"en": "one **window** per key `(caller identity, verb, limited_bucket)`",
			"ko": "키 `(caller identity, verb, limited_bucket)`마다 **윈도** 하나를 유지합니다"}},
		{"the window's length key and default", map[string]string{
			"en": "`rate_limit_coalesce_window_seconds` (default 60)",
			"ko": "`rate_limit_coalesce_window_seconds` (기본 60)"}},
		{"that each limited event of the key adds one to the count", map[string]string{
			"en": "every limited event of that key until the deadline adds one to its count",
			"ko": "기한까지 그 키의 제한 이벤트마다 개수가 하나씩 늘어납니다"}},
		{"that a closed window is one counted record, written on the tick, with window_end at the deadline", map[string]string{
			"en": "on the first daemon tick at or after the deadline, the window becomes **one** counted record",
			"ko": "기한 이후 첫 데몬 틱에서 윈도는 **하나의** 집계 레코드가 되어"}},
		{"that window_end is the deadline, not the tick", map[string]string{
			"en": "with `window_end` at the deadline",
			"ko": "`window_end`는 기한입니다"}},
		{"that windows are never keyed on the refusal reason", map[string]string{
			"en": "Windows are never keyed on the refusal reason",
			"ko": "윈도의 키에는 거부 사유가 절대 들어가지 않습니다"}},
	})
	checkClaims(t, "operations.md", "short-windows", []claim{
		{"that open windows are written on shutdown", map[string]string{
			"en": "On SIGTERM or SIGINT every open window is written",
			"ko": "SIGTERM이나 SIGINT를 받으면 열린 윈도를 모두 씁니다"}},
	})
}

// TestCountedRecordIsStated: the counted record's example has exactly the
// seed's field set (record_version 1, phase "limited", ts after
// window_end, count ≥ 1, no request_id, requested, registration_id or
// outcome), the prose says so, and the audit page's field table gives the
// limited phase the same presence rules.
func TestCountedRecordIsStated(t *testing.T) {
	checkClaims(t, "operations.md", "counted-record", []claim{
		{"that a counted record carries no per-invocation fields", map[string]string{
			"en": "A counted record has no `request_id`, `requested`, `registration_id` or `outcome`",
			"ko": "집계 레코드에는 `request_id`, `requested`, `registration_id`, `outcome`이 없습니다"}},
		{"that ts is the write instant, after window_end", map[string]string{
			"en": "`ts` is when the record was written, after `window_end`",
			"ko": "`ts`는 레코드를 쓴 시각으로 `window_end`보다 뒤"}},
		{"that limited_bucket is admission for throttled invocations", map[string]string{
			"en": "`limited_bucket` is `admission` for throttled invocations",
			"ko": "스로틀된 호출(`RegistrarBusy`를 받고 아무것도 시도되지 않은 호출자)이라면 `limited_bucket`이 `admission`입니다"}},
	})
	want := []string{"record_version", "phase", "ts", "verb", "caller_identity", "limited_bucket", "count", "window_start", "window_end"}
	absent := []string{"request_id", "requested", "registration_id", "outcome"}
	for _, lang := range seedLangs {
		raw, err := os.ReadFile(filepath.Join(lang, "operations.md"))
		if err != nil {
			t.Fatal(err)
		}
		start := bytes.Index(raw, []byte("{#counted-record}"))
		line := ""
		if start >= 0 {
			rest := string(raw[start:])
			if i := strings.Index(rest, "```json\n"); i >= 0 {
				rest = rest[i+len("```json\n"):]
				line, _, _ = strings.Cut(rest, "\n")
			}
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("%s/operations.md#counted-record: the example is not one JSON record (%v): %q", lang, err, line)
			continue
		}
		var keys []string
		for k := range rec {
			keys = append(keys, k)
		}
		if !sameSet(keys, want) {
			t.Errorf("%s/operations.md#counted-record: example fields %q, want exactly %q", lang, keys, want)
		}
		if rec["record_version"] != 1.0 || rec["phase"] != "limited" {
			t.Errorf("%s/operations.md#counted-record: record_version %v, phase %v; want 1, \"limited\"", lang, rec["record_version"], rec["phase"])
		}
		if c, _ := rec["count"].(float64); c < 1 {
			t.Errorf("%s/operations.md#counted-record: count %v, want at least 1", lang, rec["count"])
		}
		at := func(k string) time.Time {
			s, _ := rec[k].(string)
			v, err := time.Parse("2006-01-02T15:04:05.000Z", s)
			if err != nil {
				t.Errorf("%s/operations.md#counted-record: %s %q is not RFC 3339 UTC in milliseconds", lang, k, s)
			}
			return v
		}
		if ws, we, ts := at("window_start"), at("window_end"), at("ts"); we.Before(ws) || !ts.After(we) {
			t.Errorf("%s/operations.md#counted-record: want window_start ≤ window_end < ts, got %v, %v, %v", lang, ws, we, ts)
		}
	}
	// The audit page's field table: the limited column.
	required := map[string]string{"en": "required", "ko": "필수"}
	none := map[string]string{"en": "absent", "ko": "없음"}
	row := regexp.MustCompile(`^\| \d+ \| ` + "`" + `([a-z_]+)` + "`" + ` \|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|`)
	for _, lang := range seedLangs {
		raw, err := os.ReadFile(filepath.Join(lang, "audit.md"))
		if err != nil {
			t.Fatal(err)
		}
		limited := map[string]string{}
		for _, line := range strings.Split(string(raw), "\n") {
			if m := row.FindStringSubmatch(line); m != nil {
				limited[m[1]] = strings.TrimSpace(m[5])
			}
		}
		for _, k := range want {
			cell, ok := limited[k]
			if k == "phase" {
				if cell != "`\"limited\"`" {
					t.Errorf("%s/audit.md#fields: phase of a counted record is %q, want `\"limited\"`", lang, cell)
				}
				continue
			}
			if !ok || !strings.HasPrefix(cell, required[lang]) {
				t.Errorf("%s/audit.md#fields: %s in a counted record is %q, want %q", lang, k, cell, required[lang])
			}
		}
		for _, k := range absent {
			if cell := limited[k]; cell != none[lang] {
				t.Errorf("%s/audit.md#fields: %s in a counted record is %q, want %q", lang, k, cell, none[lang])
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
