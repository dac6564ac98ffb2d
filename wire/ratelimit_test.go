package wire_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// policyName draws a name as the registrar's policies are named: "default"
// or 1 to 63 characters of [a-z0-9-].
func policyName(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return "default"
	}
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 1+rng.IntN(63))
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// number draws a value the formatters may be given: small, near the
// largest Integer, or anything.
func number(rng *rand.Rand) uint64 {
	switch rng.IntN(4) {
	case 0:
		return uint64(rng.IntN(3))
	case 1:
		return uint64(rng.IntN(1 << 20))
	case 2:
		return wire.MaxSFInteger - 2 + uint64(rng.IntN(5))
	}
	return rng.Uint64()
}

// wantParams checks that a reference parse of a formatted value is one
// String Item naming name with exactly the parameters want, in order.
func wantParams(t *testing.T, value, name string, want []refParam) {
	t.Helper()
	members, err := refParseList(value)
	if err != nil {
		t.Fatalf("%q: the reference parser refuses it: %v", value, err)
	}
	if len(members) != 1 || members[0].Item == nil {
		t.Fatalf("%q: %d members, want one Item", value, len(members))
	}
	it := members[0].Item
	if it.Bare != name {
		t.Fatalf("%q: item %#v, want the String %q", value, it.Bare, name)
	}
	if !reflect.DeepEqual(it.Params, want) {
		t.Fatalf("%q: parameters %v, want %v", value, it.Params, want)
	}
}

// What the formatters write for any name and numbers parses, under an
// independent strict reading of RFC 9651, as one String Item with exactly
// q and w (w left out when 0) or r and t, each the number given capped at
// the largest Integer; wire's own parsers read the same values back; and
// appending keeps what dst held.
func TestFormattedFieldsParseStrictly(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 5))
	capped := func(n uint64) int64 { return int64(min(n, wire.MaxSFInteger)) }
	for range 5000 {
		name := policyName(rng)
		a, b := number(rng), number(rng)
		if rng.IntN(8) == 0 {
			b = 0
		}

		value := string(wire.AppendRateLimitPolicy([]byte("prefix"), name, a, b))
		if !strings.HasPrefix(value, "prefix") {
			t.Fatalf("AppendRateLimitPolicy lost what dst held: %q", value)
		}
		value = value[len("prefix"):]
		want := []refParam{{"q", capped(a)}}
		if b > 0 {
			want = append(want, refParam{"w", capped(b)})
		}
		wantParams(t, value, name, want)
		if got := wire.FormatRateLimitPolicy(name, a, b); got != value {
			t.Fatalf("FormatRateLimitPolicy %q, AppendRateLimitPolicy %q", got, value)
		}
		p, err := wire.ParseRateLimitPolicy(value)
		want1 := wire.QuotaPolicy{Name: name, Quota: uint64(capped(a))}
		if b > 0 {
			want1.Window = uint64(capped(b))
		}
		if err != nil || len(p.Policies) != 1 || !reflect.DeepEqual(p.Policies[0], want1) {
			t.Fatalf("ParseRateLimitPolicy(%q) = %+v, %v; want %+v", value, p, err, want1)
		}

		value = string(wire.AppendRateLimit([]byte("prefix"), name, a, b))[len("prefix"):]
		wantParams(t, value, name, []refParam{{"r", capped(a)}, {"t", capped(b)}})
		if got := wire.FormatRateLimit(name, a, b); got != value {
			t.Fatalf("FormatRateLimit %q, AppendRateLimit %q", got, value)
		}
		l, err := wire.ParseRateLimit(value)
		want2 := wire.ServiceLimit{Name: name, Remaining: uint64(capped(a)), EffectiveWindow: uint64(capped(b)), HasEffectiveWindow: true}
		if err != nil || len(l.Limits) != 1 || !reflect.DeepEqual(l.Limits[0], want2) {
			t.Fatalf("ParseRateLimit(%q) = %+v, %v; want %+v", value, l, err, want2)
		}
	}
}

// A name no policy has (quotes, backslashes, bytes a String cannot hold)
// still gives a value that parses: escaped, or written as "?".
func TestFormattedNamesAlwaysParse(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{`a"b`, `a"b`},
		{`a\b`, `a\b`},
		{" a~b ", " a~b "}, // the ends of printable ASCII are kept
		{"tab\there", "tab?here"},
		{"é", "??"},
		{"\x7f\x1f", "??"},
		{"", ""},
	} {
		value := wire.FormatRateLimit(tc.name, 1, 2)
		wantParams(t, value, tc.want, []refParam{{"r", int64(1)}, {"t", int64(2)}})
		value = wire.FormatRateLimitPolicy(tc.name, 1, 2)
		wantParams(t, value, tc.want, []refParam{{"q", int64(1)}, {"w", int64(2)}})
	}
}

func TestAppendingAFieldDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() {
		buf = wire.AppendRateLimitPolicy(buf[:0], "control-plane", 1600, 160)
		buf = wire.AppendRateLimit(buf, "control-plane", 1599, 1)
	}); n != 0 {
		t.Errorf("%v allocations per append, want 0", n)
	}
}

// The draft's own examples (sections 3.2, 4.2 and appendix B) are read as
// it describes them.
func TestParsersReadTheDraftsExamples(t *testing.T) {
	pk := func(s string) []byte { b, _ := refBase64(s); return b }
	for _, tc := range []struct {
		value string
		want  []wire.QuotaPolicy
	}{
		{`"burst";q=100;w=60,"daily";q=1000;w=86400`, []wire.QuotaPolicy{{Name: "burst", Quota: 100, Window: 60}, {Name: "daily", Quota: 1000, Window: 86400}}},
		{`"default";q=100;w=10`, []wire.QuotaPolicy{{Name: "default", Quota: 100, Window: 10}}},
		{`"permin";q=50;w=60,"perhr";q=1000;w=3600`, []wire.QuotaPolicy{{Name: "permin", Quota: 50, Window: 60}, {Name: "perhr", Quota: 1000, Window: 3600}}},
		{`"peruser";q=100;w=60;pk=:cHsdsRa894==:`, []wire.QuotaPolicy{{Name: "peruser", Quota: 100, Window: 60, PartitionKey: pk("cHsdsRa894==")}}},
		{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, []wire.QuotaPolicy{{Name: "peruser", Quota: 65535, QuotaUnit: "content-bytes", Window: 10, PartitionKey: pk("sdfjLJUOUH==")}}},
		{`"hour";q=1000;w=3600, "day";q=5000;w=86400`, []wire.QuotaPolicy{{Name: "hour", Quota: 1000, Window: 3600}, {Name: "day", Quota: 5000, Window: 86400}}},
		{`"sliding";q=100;w=60;burst=1000`, []wire.QuotaPolicy{{Name: "sliding", Quota: 100, Window: 60}}},
		// Two field lines, joined as RFC 9110 joins them.
		{`"sliding";q=100;w=60;burst=1000, "fixed";q=5000;w=3600;burst=0`, []wire.QuotaPolicy{{Name: "sliding", Quota: 100, Window: 60}, {Name: "fixed", Quota: 5000, Window: 3600}}},
	} {
		got, err := wire.ParseRateLimitPolicy(tc.value)
		if err != nil || !reflect.DeepEqual(got.Policies, tc.want) {
			t.Errorf("ParseRateLimitPolicy(%q) = %+v, %v; want %+v", tc.value, got.Policies, err, tc.want)
		}
	}
	for _, tc := range []struct {
		value string
		want  []wire.ServiceLimit
	}{
		{`"default";r=50;t=30`, []wire.ServiceLimit{{Name: "default", Remaining: 50, EffectiveWindow: 30, HasEffectiveWindow: true}}},
		{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, []wire.ServiceLimit{{Name: "default", Remaining: 999, PartitionKey: []byte("trial121323")}}},
		{`"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`, []wire.ServiceLimit{{Name: "default", Remaining: 300000000, EffectiveWindow: 60, HasEffectiveWindow: true, PartitionKey: []byte("App-999")}}},
		{`"problemPolicy";r=0;t=10`, []wire.ServiceLimit{{Name: "problemPolicy", EffectiveWindow: 10, HasEffectiveWindow: true}}},
		// The FAQ's sliding window example carries q as a comment.
		{`"sliding";q=12;r=6;t=1`, []wire.ServiceLimit{{Name: "sliding", Remaining: 6, EffectiveWindow: 1, HasEffectiveWindow: true}}},
	} {
		got, err := wire.ParseRateLimit(tc.value)
		if err != nil || !reflect.DeepEqual(got.Limits, tc.want) {
			t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v", tc.value, got.Limits, err, tc.want)
		}
	}
}

// What RFC 9651 and the draft allow a sender, beyond the registrar's own
// shape: whitespace where the grammar has it, every bare item type in an
// unknown parameter, a repeated parameter (the last counts), a Boolean
// parameter without a value.
func TestParsersAcceptWhatTheGrammarAllows(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  wire.ServiceLimit
	}{
		{`  "a";r=1;t=2  `, wire.ServiceLimit{Name: "a", Remaining: 1, EffectiveWindow: 2, HasEffectiveWindow: true}},
		{`"a";r=1;  t=2`, wire.ServiceLimit{Name: "a", Remaining: 1, EffectiveWindow: 2, HasEffectiveWindow: true}},
		{`"a";r=5;r=1`, wire.ServiceLimit{Name: "a", Remaining: 1}},
		{`"a";r="x";r=1`, wire.ServiceLimit{Name: "a", Remaining: 1}},
		{`"a";r=-0`, wire.ServiceLimit{Name: "a"}},
		{`"a";r=000000000000007`, wire.ServiceLimit{Name: "a", Remaining: 7}},
		{`"a";r=999999999999999`, wire.ServiceLimit{Name: "a", Remaining: wire.MaxSFInteger}},
		{`"a";r=1;acme-x=1.5;acme-y=tok:/x;b;c=?0;d=@-12;e=%"caf%c3%a9";f=:AQ:;g="s\"\\"`, wire.ServiceLimit{Name: "a", Remaining: 1}},
		{`"esc\"aped\\";r=1`, wire.ServiceLimit{Name: `esc"aped\`, Remaining: 1}},
		{`" ~edges~ ";r=1`, wire.ServiceLimit{Name: " ~edges~ ", Remaining: 1}},
		{`"a";r=1;d=%" ~%7f%7F%c3%A9~ "`, wire.ServiceLimit{Name: "a", Remaining: 1}},
		{`"a";r=1;pk=::`, wire.ServiceLimit{Name: "a", Remaining: 1, PartitionKey: []byte{}}},
		{`"a";r=1;pk=:YQ:`, wire.ServiceLimit{Name: "a", Remaining: 1, PartitionKey: []byte("a")}},
		{`"a";r=1;*x=1`, wire.ServiceLimit{Name: "a", Remaining: 1}},
	} {
		got, err := wire.ParseRateLimit(tc.value)
		if err != nil || len(got.Limits) != 1 || !reflect.DeepEqual(got.Limits[0], tc.want) {
			t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v", tc.value, got, err, tc.want)
		}
	}
	got, err := wire.ParseRateLimit("\"a\";r=1 \t,\t \"b\";r=2")
	if err != nil || len(got.Limits) != 2 || got.Limits[1].Name != "b" {
		t.Errorf("tabs around the comma: %+v, %v", got, err)
	}
	many := strings.Repeat(`"a";r=1, `, wire.MaxRateLimitItems-1) + `"z";r=2`
	if got, err := wire.ParseRateLimit(many); err != nil || len(got.Limits) != wire.MaxRateLimitItems {
		t.Errorf("%d items: %d read, %v", wire.MaxRateLimitItems, len(got.Limits), err)
	}
}

// refusals holds field values each parser refuses, with the error kind.
var refusals = []struct {
	policy bool // a RateLimit-Policy value; else a RateLimit value
	value  string
	want   error
}{
	{true, ``, wire.ErrRateLimitEmpty},
	{false, `   `, wire.ErrRateLimitEmpty},
	{true, `default;q=1`, wire.ErrRateLimitNotString},
	{true, `1;q=1`, wire.ErrRateLimitNotString},
	{false, `("a");r=1`, wire.ErrRateLimitNotString},
	{false, `"a";r=1, :YQ==:;r=1`, wire.ErrRateLimitNotString},
	{true, `"a"`, wire.ErrRateLimitMissing},
	{true, `"a";w=1`, wire.ErrRateLimitMissing},
	{false, `"a";t=1`, wire.ErrRateLimitMissing},
	{false, `"a";R=1`, wire.ErrRateLimitSyntax},
	{true, `"a";q`, wire.ErrRateLimitType},
	{true, `"a";q=1.0`, wire.ErrRateLimitType},
	{true, `"a";q="1"`, wire.ErrRateLimitType},
	{true, `"a";q=1;w=a`, wire.ErrRateLimitType},
	{true, `"a";q=1;qu=requests`, wire.ErrRateLimitType},
	{true, `"a";q=1;pk="x"`, wire.ErrRateLimitType},
	{false, `"a";r=@1`, wire.ErrRateLimitType},
	{false, `"a";r=1;t=?1`, wire.ErrRateLimitType},
	{false, `"a";r=1;pk=abc`, wire.ErrRateLimitType},
	{true, `"a";q=-1`, wire.ErrRateLimitRange},
	{true, `"a";q=1;w=0`, wire.ErrRateLimitRange},
	{true, `"a";q=1;w=-5`, wire.ErrRateLimitRange},
	{false, `"a";r=-1`, wire.ErrRateLimitRange},
	{false, `"a";r=1;t=-1`, wire.ErrRateLimitRange},
	{false, strings.Repeat(`"a";r=1,`, wire.MaxRateLimitItems) + `"a";r=1`, wire.ErrRateLimitTooMany},
	// RFC 9651's grammar.
	{false, `"a";r=1,`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1,,"b";r=1`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1 "b";r=1`, wire.ErrRateLimitSyntax},
	{false, `"a" ;r=1`, wire.ErrRateLimitSyntax},
	{false, `"a";r =1`, wire.ErrRateLimitSyntax},
	{false, `"a";r= 1`, wire.ErrRateLimitSyntax},
	{false, "\t\"a\";r=1", wire.ErrRateLimitSyntax},
	{false, `"a`, wire.ErrRateLimitSyntax},
	{false, `"a\"`, wire.ErrRateLimitSyntax},
	{false, `"a\n";r=1`, wire.ErrRateLimitSyntax},
	{false, "\"a\tb\";r=1", wire.ErrRateLimitSyntax},
	{false, "\"caf\xc3\xa9\";r=1", wire.ErrRateLimitSyntax},
	{false, `'a';r=1`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1000000000000000`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=1234567890123.5`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=1.2345`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=1.`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=-`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=1.2.3`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=?2`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=?`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=@1.5`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=@`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=:YQ==`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=:Y===:`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=:YQ===:`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=:Y=Q=:`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=:Y Q:`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"a`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"%c3"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"%zz"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"%c"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%a"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"é"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=%"%ff"`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;X=1`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;1x=1`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=$`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=tok;`, wire.ErrRateLimitSyntax},
	{false, `"a";r=1;x=tok"`, wire.ErrRateLimitSyntax},
}

// Everything else is refused whole, with the kind of fault named and the
// place given.
func TestParsersRefuseWhatTheDraftDoesNotAllow(t *testing.T) {
	for _, tc := range refusals {
		var err error
		field := wire.HeaderRateLimit
		if tc.policy {
			field = wire.HeaderRateLimitPolicy
			var f wire.RateLimitPolicy
			f, err = wire.ParseRateLimitPolicy(tc.value)
			if f.Policies != nil {
				t.Errorf("%q: refused but gave %+v", tc.value, f)
			}
		} else {
			var f wire.RateLimit
			f, err = wire.ParseRateLimit(tc.value)
			if f.Limits != nil {
				t.Errorf("%q: refused but gave %+v", tc.value, f)
			}
		}
		var fe *wire.RateLimitFieldError
		if !errors.Is(err, tc.want) || !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s %q: got %v, want %v in a *RateLimitFieldError of %s", field, tc.value, err, tc.want, field)
			continue
		}
		if !strings.HasPrefix(err.Error(), "wire: "+field+" field") {
			t.Errorf("%q: message %q does not name the field", tc.value, err)
		}
	}
}

// The error says where: the byte of a syntax error, the item and the
// parameter of a field rule broken, and the value against the rule.
func TestRefusalsSayWhere(t *testing.T) {
	for _, tc := range []struct {
		policy bool
		value  string
		want   string
	}{
		{false, `"a";r=1,`, "wire: RateLimit field at byte 8: not a structured-field List (RFC 9651)"},
		{true, `"a";q=1, "b";q=2;w=0`, "wire: RateLimit-Policy field, item 2, parameter w: a parameter out of range: 0, want an Integer ≥ 1"},
		{true, `"a";q=1, b;q=2`, "wire: RateLimit-Policy field, item 2: an item that is not a String"},
		{false, `"a";r=1;t=-3`, "wire: RateLimit field, item 1, parameter t: a parameter out of range: -3, want an Integer ≥ 0"},
		{false, `"a";t=1`, "wire: RateLimit field, item 1, parameter r: a required parameter is missing"},
		{false, `"a";r=1;pk=1`, "wire: RateLimit field, item 1, parameter pk: a parameter of the wrong type: want a Byte Sequence"},
		{true, `"a";q=1;qu=1`, "wire: RateLimit-Policy field, item 1, parameter qu: a parameter of the wrong type: want a String"},
		{true, `"a";q=x`, "wire: RateLimit-Policy field, item 1, parameter q: a parameter of the wrong type: want an Integer"},
		{true, ``, "wire: RateLimit-Policy field: no item"},
	} {
		var err error
		if tc.policy {
			_, err = wire.ParseRateLimitPolicy(tc.value)
		} else {
			_, err = wire.ParseRateLimit(tc.value)
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.value, err, tc.want)
		}
	}
}

// checkAgainstReference holds wire's parsers to the reference on value:
// each accepts exactly when the reference parses value as a List and the
// draft's rules hold, and then reads the same items.
func checkAgainstReference(t *testing.T, value string) {
	t.Helper()
	got, err := wire.ParseRateLimitPolicy(value)
	want, ok := refRateLimitPolicy(value)
	if (err == nil) != ok || ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseRateLimitPolicy(%q) = %+v, %v; the reference reads %+v, accepted %v", value, got, err, want, ok)
	}
	gotL, err := wire.ParseRateLimit(value)
	wantL, ok := refRateLimit(value)
	if (err == nil) != ok || ok && !reflect.DeepEqual(gotL, wantL) {
		t.Fatalf("ParseRateLimit(%q) = %+v, %v; the reference reads %+v, accepted %v", value, gotL, err, wantL, ok)
	}
}

// randomField writes a field value from RFC 9651's grammar with the
// draft's parameters likely, then sometimes damages one byte, so that both
// acceptance and every kind of refusal are met often.
func randomField(rng *rand.Rand) string {
	bares := []func() string{
		func() string { return strconv.Itoa(rng.IntN(2000) - 5) },
		func() string { return strconv.FormatInt(wire.MaxSFInteger-1+int64(rng.IntN(3))*pick(rng, 1, 10), 10) },
		func() string { return strconv.Itoa(rng.IntN(100)) + "." + strconv.Itoa(rng.IntN(10000)) },
		func() string { return `"` + pickS(rng, "default", "a b", `q\"x`, `\\`, "", "control-plane") + `"` },
		func() string { return pickS(rng, "tok", "*", "a:b/c", "T-1") },
		func() string { return ":" + pickS(rng, "", "YQ==", "YQ", "YWJj", "YR==", "Y", "YQ=", "YWJjZA=") + ":" },
		func() string { return pickS(rng, "?0", "?1") },
		func() string { return "@" + strconv.Itoa(rng.IntN(100)-50) },
		func() string { return `%"` + pickS(rng, "x", "%c3%a9", "%C3%A9", "%c3", "%41") + `"` },
	}
	bare := func() string { return bares[rng.IntN(len(bares))]() }
	keys := []string{"q", "w", "r", "t", "qu", "pk", "acme-burst", "*x", "q"}
	var b strings.Builder
	for i := range 1 + rng.IntN(3) {
		if i > 0 {
			b.WriteString(pickS(rng, ",", ", ", " ,\t"))
		}
		if rng.IntN(12) == 0 {
			b.WriteString("(" + bare() + " " + bare() + ")")
		} else if rng.IntN(6) == 0 {
			b.WriteString(bare())
		} else {
			b.WriteString(`"` + pickS(rng, "default", "a", "control-plane") + `"`)
		}
		if rng.IntN(2) == 0 { // the draft's shape, likely to be accepted
			for _, k := range []string{"q", "r", "w", "t"} {
				if rng.IntN(6) != 0 {
					b.WriteString(";" + k + "=" + strconv.Itoa(rng.IntN(100)))
				}
			}
		}
		for range rng.IntN(4) {
			b.WriteString(";" + pickS(rng, "", "", " ") + keys[rng.IntN(len(keys))])
			if rng.IntN(8) != 0 {
				b.WriteString("=" + bare())
			}
		}
	}
	s := []byte(b.String())
	if rng.IntN(4) == 0 {
		const damage = " \t,;=\"\\:()?@%-.0aA\x00\xff"
		s[rng.IntN(len(s))] = damage[rng.IntN(len(damage))]
	}
	return string(s)
}

func pick(rng *rand.Rand, v ...int64) int64    { return v[rng.IntN(len(v))] }
func pickS(rng *rand.Rand, v ...string) string { return v[rng.IntN(len(v))] }

// On the refusals, the draft's examples and many values drawn from the
// grammar (with damage), wire's parsers and the reference agree on what is
// accepted and on what it says.
func TestParsersAgreeWithTheReference(t *testing.T) {
	for _, tc := range refusals {
		checkAgainstReference(t, tc.value)
	}
	rng := rand.New(rand.NewPCG(35, 55))
	var policies, limits int
	for range 20000 {
		v := randomField(rng)
		checkAgainstReference(t, v)
		if _, err := wire.ParseRateLimitPolicy(v); err == nil {
			policies++
		}
		if _, err := wire.ParseRateLimit(v); err == nil {
			limits++
		}
	}
	if policies < 800 || limits < 800 {
		t.Errorf("of 20000 drawn values %d were accepted as policies and %d as limits: the draw no longer tests acceptance", policies, limits)
	}
}

func FuzzRateLimitParsers(f *testing.F) {
	for _, tc := range refusals {
		f.Add(tc.value)
	}
	for _, v := range []string{
		`"default";q=8;w=4`, `"default";r=3;t=1`, `"burst";q=100;w=60,"daily";q=1000;w=86400`,
		`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `"a";r=1;acme-x=1.5;e=%"caf%c3%a9"`,
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		checkAgainstReference(t, value)
	})
}

// What is formatted is parsed back: for every name a String can hold
// unchanged, the name and the numbers (capped at the largest Integer)
// come back.
func FuzzRateLimitRoundTrip(f *testing.F) {
	f.Add("default", uint64(8), uint64(4))
	f.Add("control-plane", uint64(0), uint64(0))
	f.Add(`q"\`, uint64(math.MaxUint64), uint64(wire.MaxSFInteger))
	f.Fuzz(func(t *testing.T, name string, a, b uint64) {
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] > 0x7e {
				name = name[:i] + "?" + name[i+1:] // what the formatters write for it
			}
		}
		p, err := wire.ParseRateLimitPolicy(wire.FormatRateLimitPolicy(name, a, b))
		want := wire.QuotaPolicy{Name: name, Quota: min(a, wire.MaxSFInteger)}
		if b > 0 {
			want.Window = min(b, wire.MaxSFInteger)
		}
		if err != nil || len(p.Policies) != 1 || !reflect.DeepEqual(p.Policies[0], want) {
			t.Fatalf("policy %q %d %d: read back %+v, %v", name, a, b, p, err)
		}
		l, err := wire.ParseRateLimit(wire.FormatRateLimit(name, a, b))
		wantL := wire.ServiceLimit{Name: name, Remaining: min(a, wire.MaxSFInteger), EffectiveWindow: min(b, wire.MaxSFInteger), HasEffectiveWindow: true}
		if err != nil || len(l.Limits) != 1 || !reflect.DeepEqual(l.Limits[0], wantL) {
			t.Fatalf("limit %q %d %d: read back %+v, %v", name, a, b, l, err)
		}
	})
}

// w never overstates the refill rate: burst/w ≤ 1/interval, that is
// w ≥ burst × interval, and it overstates the window by less than a
// second; it is at least 1 and at most the largest Integer.
func TestRateLimitWindowSecondsNeverOverstatesTheRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 7))
	for range 100000 {
		burst := uint64(1 + rng.IntN(1<<16))
		interval := time.Duration(1 + rng.Int64N(int64(10*time.Minute)))
		if rng.IntN(4) == 0 {
			interval = time.Duration(1+rng.IntN(100)) * 100 * time.Millisecond
		}
		w := wire.RateLimitWindowSeconds(burst, interval)
		exact := float64(burst) * interval.Seconds()
		if float64(w) < exact-1e-6 || float64(w) >= exact+1 || w < 1 {
			t.Fatalf("burst %d, interval %v: w=%d, want ⌈%.9f⌉", burst, interval, w, exact)
		}
		// The interval the client derives from q and w is never shorter.
		if got := (wire.QuotaPolicy{Quota: burst, Window: w}).Interval(); got < interval {
			t.Fatalf("burst %d, interval %v: w=%d gives an interval of %v, shorter", burst, interval, w, got)
		}
	}
	for _, tc := range []struct {
		burst    uint64
		interval time.Duration
		want     uint64
	}{
		{8, 500 * time.Millisecond, 4},
		{512, 500 * time.Millisecond, 256},
		{1600, 100 * time.Millisecond, 160},
		{7, 300 * time.Millisecond, 3},
		{1, time.Nanosecond, 1},
		{1, time.Second, 1},
		{1, time.Second + 1, 2},
		{0, time.Second, 1},
		{5, 0, 1},
		{math.MaxUint32, math.MaxInt64, wire.MaxSFInteger},
		{1 << 40, time.Second, 1 << 40},
		{wire.MaxSFInteger + 1, time.Second, wire.MaxSFInteger},
	} {
		if got := wire.RateLimitWindowSeconds(tc.burst, tc.interval); got != tc.want {
			t.Errorf("RateLimitWindowSeconds(%d, %v) = %d, want %d", tc.burst, tc.interval, got, tc.want)
		}
	}
}

func TestDelaySecondsRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want uint64
	}{
		{-time.Second, 0}, {0, 0}, {1, 1}, {time.Second - 1, 1}, {time.Second, 1},
		{time.Second + 1, 2}, {1500 * time.Millisecond, 2}, {time.Hour, 3600},
	} {
		if got := wire.DelaySeconds(tc.d); got != tc.want {
			t.Errorf("DelaySeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestQuotaPolicyInterval(t *testing.T) {
	for _, tc := range []struct {
		q, w uint64
		want time.Duration
	}{
		{8, 4, 500 * time.Millisecond},
		{1600, 160, 100 * time.Millisecond},
		{3, 1, 333333334}, // rounded up to the nanosecond
		{7, 3, 428571429},
		{1, wire.MaxSFInteger, math.MaxInt64},
		{0, 4, 0},
		{8, 0, 0},
		{1 << 20, 1 << 43, time.Duration(1<<23) * time.Second},
	} {
		if got := (wire.QuotaPolicy{Quota: tc.q, Window: tc.w}).Interval(); got != tc.want {
			t.Errorf("q=%d w=%d: Interval %v, want %v", tc.q, tc.w, got, tc.want)
		}
	}
}

func TestLookupFindsTheFirstOfAName(t *testing.T) {
	p, _ := wire.ParseRateLimitPolicy(`"a";q=1, "b";q=2, "b";q=3`)
	if got, ok := p.Lookup("b"); !ok || got.Quota != 2 {
		t.Errorf("Lookup(b) = %+v, %v; want q=2", got, ok)
	}
	if _, ok := p.Lookup("c"); ok {
		t.Error("Lookup(c) found a policy")
	}
	l, _ := wire.ParseRateLimit(`"a";r=1, "b";r=2, "b";r=3`)
	if got, ok := l.Lookup("b"); !ok || got.Remaining != 2 {
		t.Errorf("Lookup(b) = %+v, %v; want r=2", got, ok)
	}
	if _, ok := l.Lookup("c"); ok {
		t.Error("Lookup(c) found a limit")
	}
}

// The figures for the server's hot path: one field of each per answer.
func BenchmarkAppendRateLimitFields(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 128)
	for b.Loop() {
		buf = wire.AppendRateLimitPolicy(buf[:0], "control-plane", 1600, 160)
		buf = wire.AppendRateLimit(buf[:0], "control-plane", 1599, 1)
	}
}

func BenchmarkParseRateLimit(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseRateLimit(`"control-plane";r=1599;t=1`); err != nil {
			b.Fatal(err)
		}
	}
}
