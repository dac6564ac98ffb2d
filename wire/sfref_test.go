package wire_test

// An independent reading of RFC 9651 (Structured Field Values for HTTP),
// enough for the RateLimit fields: a whole List (Items and Inner Lists, with
// Parameters) of every bare item type, into plain Go values. It is written
// apart from wire's scanner and in another way (regular expressions for the
// lexical rules, whole-value checks afterwards) so that the two agreeing on
// an input says something. The field rules of the ratelimit draft are
// applied to its result by refRateLimitPolicy and refRateLimit.

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/wire"
)

// The bare item types, as the reference parser returns them: int64,
// refDecimal, string, refToken, []byte, bool, refDate, refDisplay.
type (
	refDecimal string // the text, checked
	refToken   string
	refDate    int64
	refDisplay string // the decoded text
)

type refParam struct {
	Key   string
	Value any
}

// refItem is a bare item with its parameters.
type refItem struct {
	Bare   any
	Params []refParam
}

// refMember is a List member: Inner is set for an Inner List, Item otherwise.
type refMember struct {
	Item   *refItem
	Inner  []refItem
	Params []refParam // an Inner List's own parameters
}

var errRef = errors.New("sf: parse failure")

var (
	reNumber  = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?`)
	reString  = regexp.MustCompile(`^"((?:[ !#-\[\]-~]|\\["\\])*)"`)
	reToken   = regexp.MustCompile("^[A-Za-z*][!#$%&'*+\\-.^_`|~0-9A-Za-z:/]*")
	reBinary  = regexp.MustCompile(`^:([A-Za-z0-9+/=]*):`)
	reBoolean = regexp.MustCompile(`^\?[01]`)
	reKey     = regexp.MustCompile(`^[a-z*][a-z0-9_\-.*]*`)
	reDisplay = regexp.MustCompile(`^%"((?:[ !#-$&-~]|%[0-9a-fA-F]{2})*)"`)
)

type refParser struct{ rest string }

// refParseList parses a whole field value as a List (RFC 9651 section
// 4.2, with field_type "list").
func refParseList(value string) ([]refMember, error) {
	p := &refParser{rest: strings.TrimLeft(value, " ")}
	members := []refMember{}
	for p.rest != "" {
		m, err := p.member()
		if err != nil {
			return nil, err
		}
		members = append(members, m)
		p.rest = strings.TrimLeft(p.rest, " \t")
		if p.rest == "" {
			break
		}
		if p.rest[0] != ',' {
			return nil, errRef
		}
		p.rest = strings.TrimLeft(p.rest[1:], " \t")
		if p.rest == "" {
			return nil, errRef // trailing comma
		}
	}
	return members, nil
}

func (p *refParser) member() (refMember, error) {
	if !strings.HasPrefix(p.rest, "(") {
		it, err := p.item()
		return refMember{Item: &it}, err
	}
	p.rest = p.rest[1:]
	var inner []refItem
	for {
		p.rest = strings.TrimLeft(p.rest, " ")
		if p.rest == "" {
			return refMember{}, errRef
		}
		if p.rest[0] == ')' {
			p.rest = p.rest[1:]
			ps, err := p.params()
			return refMember{Inner: inner, Params: ps}, err
		}
		it, err := p.item()
		if err != nil {
			return refMember{}, err
		}
		inner = append(inner, it)
		if p.rest == "" || p.rest[0] != ' ' && p.rest[0] != ')' {
			return refMember{}, errRef
		}
	}
}

func (p *refParser) item() (refItem, error) {
	b, err := p.bare()
	if err != nil {
		return refItem{}, err
	}
	ps, err := p.params()
	return refItem{Bare: b, Params: ps}, err
}

// params keeps the parameters in first-seen order, a repeated key taking
// the later value in the earlier place (an ordered map, overwritten).
func (p *refParser) params() ([]refParam, error) {
	var ps []refParam
	for strings.HasPrefix(p.rest, ";") {
		p.rest = strings.TrimLeft(p.rest[1:], " ")
		k := reKey.FindString(p.rest)
		if k == "" {
			return nil, errRef
		}
		p.rest = p.rest[len(k):]
		var v any = true
		if strings.HasPrefix(p.rest, "=") {
			p.rest = p.rest[1:]
			var err error
			if v, err = p.bare(); err != nil {
				return nil, err
			}
		}
		i := 0
		for i < len(ps) && ps[i].Key != k {
			i++
		}
		if i < len(ps) {
			ps[i].Value = v
		} else {
			ps = append(ps, refParam{Key: k, Value: v})
		}
	}
	return ps, nil
}

func (p *refParser) take(re *regexp.Regexp) []string {
	m := re.FindStringSubmatch(p.rest)
	if m != nil {
		p.rest = p.rest[len(m[0]):]
	}
	return m
}

func (p *refParser) bare() (any, error) {
	if p.rest == "" {
		return nil, errRef
	}
	switch c := p.rest[0]; {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		m := p.take(reString)
		if m == nil {
			return nil, errRef
		}
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[1]), nil
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return refToken(p.take(reToken)[0]), nil
	case c == ':':
		m := p.take(reBinary)
		if m == nil {
			return nil, errRef
		}
		return refBase64(m[1])
	case c == '?':
		m := p.take(reBoolean)
		if m == nil {
			return nil, errRef
		}
		return m[0] == "?1", nil
	case c == '@':
		p.rest = p.rest[1:]
		n, err := p.number()
		if i, ok := n.(int64); ok && err == nil {
			return refDate(i), nil
		}
		return nil, errRef
	case c == '%':
		m := p.take(reDisplay)
		if m == nil {
			return nil, errRef
		}
		var b []byte
		for s := m[1]; s != ""; {
			if s[0] == '%' {
				v, _ := strconv.ParseUint(s[1:3], 16, 8)
				b, s = append(b, byte(v)), s[3:]
			} else {
				b, s = append(b, s[0]), s[1:]
			}
		}
		if !utf8.Valid(b) {
			return nil, errRef
		}
		return refDisplay(b), nil
	}
	return nil, errRef
}

// number takes the longest digits[.digits] and then applies section
// 4.2.4's bounds to the whole: an Integer of at most 15 digits, a Decimal
// of at most 12 integer and 1 to 3 fractional digits.
func (p *refParser) number() (any, error) {
	m := p.take(reNumber)
	if m == nil {
		return nil, errRef
	}
	digits := strings.TrimPrefix(m[0], "-")
	if m[1] == "" {
		if len(digits) > 15 {
			return nil, errRef
		}
		n, err := strconv.ParseInt(m[0], 10, 64)
		return n, err
	}
	whole, frac, _ := strings.Cut(digits, ".")
	if len(whole) > 12 || len(frac) < 1 || len(frac) > 3 {
		return nil, errRef
	}
	return refDecimal(m[0]), nil
}

// refBase64 decodes base64 by hand: the padding may be missing (then it is
// synthesized), but never more than the last group needs; pad bits are
// ignored.
func refBase64(text string) ([]byte, error) {
	data := strings.TrimRight(text, "=")
	pads := len(text) - len(data)
	if strings.Contains(data, "=") || len(data)%4 == 1 || len(data)+pads > (len(data)+3)/4*4 {
		return nil, errRef
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	out := []byte{}
	var acc, bitsHeld uint
	for i := 0; i < len(data); i++ {
		acc = acc<<6 | uint(strings.IndexByte(alphabet, data[i]))
		bitsHeld += 6
		if bitsHeld >= 8 {
			bitsHeld -= 8
			out = append(out, byte(acc>>bitsHeld))
			acc &= 1<<bitsHeld - 1
		}
	}
	return out, nil
}

// The draft's field rules, applied to a reference parse: a non-empty List
// of String Items (at most wire.MaxRateLimitItems), with the defined
// parameters of their types and ranges.

func refParam2(ps []refParam, key string) (any, bool) {
	for _, p := range ps {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

// refUint reads an Integer parameter ≥ least; absent is (0, false, true).
func refUint(ps []refParam, key string, least int64) (n uint64, present, ok bool) {
	v, present := refParam2(ps, key)
	if !present {
		return 0, false, true
	}
	i, isInt := v.(int64)
	if !isInt || i < least {
		return 0, true, false
	}
	return uint64(i), true, true
}

func refItems(value string) ([]refItem, bool) {
	members, err := refParseList(value)
	if err != nil || len(members) == 0 || len(members) > wire.MaxRateLimitItems {
		return nil, false
	}
	var items []refItem
	for _, m := range members {
		if m.Item == nil {
			return nil, false
		}
		if _, isString := m.Item.Bare.(string); !isString {
			return nil, false
		}
		items = append(items, *m.Item)
	}
	return items, true
}

func refPK(ps []refParam) ([]byte, bool) {
	v, present := refParam2(ps, "pk")
	if !present {
		return nil, true
	}
	b, ok := v.([]byte)
	return b, ok
}

func refRateLimitPolicy(value string) (wire.RateLimitPolicy, bool) {
	items, ok := refItems(value)
	if !ok {
		return wire.RateLimitPolicy{}, false
	}
	var f wire.RateLimitPolicy
	for _, it := range items {
		p := wire.QuotaPolicy{Name: it.Bare.(string)}
		var present bool
		if p.Quota, present, ok = refUint(it.Params, "q", 0); !present || !ok {
			return wire.RateLimitPolicy{}, false
		}
		if p.Window, _, ok = refUint(it.Params, "w", 1); !ok {
			return wire.RateLimitPolicy{}, false
		}
		if v, present := refParam2(it.Params, "qu"); present {
			if p.QuotaUnit, ok = v.(string); !ok {
				return wire.RateLimitPolicy{}, false
			}
		}
		if p.PartitionKey, ok = refPK(it.Params); !ok {
			return wire.RateLimitPolicy{}, false
		}
		f.Policies = append(f.Policies, p)
	}
	return f, true
}

func refRateLimit(value string) (wire.RateLimit, bool) {
	items, ok := refItems(value)
	if !ok {
		return wire.RateLimit{}, false
	}
	var f wire.RateLimit
	for _, it := range items {
		l := wire.ServiceLimit{Name: it.Bare.(string)}
		var present bool
		if l.Remaining, present, ok = refUint(it.Params, "r", 0); !present || !ok {
			return wire.RateLimit{}, false
		}
		if l.EffectiveWindow, l.HasEffectiveWindow, ok = refUint(it.Params, "t", 0); !ok {
			return wire.RateLimit{}, false
		}
		if l.PartitionKey, ok = refPK(it.Params); !ok {
			return wire.RateLimit{}, false
		}
		f.Limits = append(f.Limits, l)
	}
	return f, true
}
