package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The codec of the two limits requests. It is stricter than the verbs'
// (DecodeMint ignores unknown members, for a client newer than the
// daemon): a reset is an operator's order, and a misspelt member
// ("bukcet") ignored would widen the reset to every bucket. So an unknown
// member, a member twice, a null and anything but a string value are each
// refused, naming the member.

// ErrAdminRequest is matched (errors.Is) by every *AdminRequestError.
var ErrAdminRequest = errors.New("wire: bad administrative request")

// AdminRequestError is a limits request the daemon refuses as
// AdminBadRequest (400), and the client before sending it: Member names
// the member or query parameter ("identity", "verb", "bucket", "query",
// "body"), Problem says what is wrong with it.
type AdminRequestError struct {
	Member  string
	Problem string
}

func (e *AdminRequestError) Error() string { return e.Member + ": " + e.Problem }

// Is makes every *AdminRequestError match ErrAdminRequest.
func (e *AdminRequestError) Is(target error) bool { return target == ErrAdminRequest }

// CheckIdentity reports an identity no caller can have, as the member
// "identity": empty, longer than MaxIdentityBytes, not valid UTF-8, or
// holding a control character (the transports never produce one).
func CheckIdentity(identity string) error {
	bad := func(format string, args ...any) error {
		return &AdminRequestError{Member: "identity", Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case identity == "":
		return bad("empty")
	case len(identity) > MaxIdentityBytes:
		return bad("%d bytes, longer than the %d bytes an identity may have", len(identity), MaxIdentityBytes)
	case !utf8.ValidString(identity):
		return bad("not valid UTF-8")
	}
	for i := 0; i < len(identity); i++ {
		if c := identity[i]; c < 0x20 || c == 0x7f {
			return bad("a control character (0x%02x) at byte %d: no identity has one", c, i)
		}
	}
	return nil
}

// DecodeLimitsQuery reads the query string of GET /v1/admin/limits: no
// parameter, or identity once with a valid identity. Any other parameter
// is refused.
func DecodeLimitsQuery(rawQuery string) (LimitsRequest, error) {
	values, err := url.ParseQuery(rawQuery)
	if err != nil {
		return LimitsRequest{}, &AdminRequestError{Member: "query", Problem: "not a query string: " + err.Error()}
	}
	for k := range values {
		if k != "identity" {
			return LimitsRequest{}, &AdminRequestError{Member: "query", Problem: "unknown parameter " + vocab.QuoteBounded(k) + " (the one parameter is identity)"}
		}
	}
	ids, ok := values["identity"]
	switch {
	case !ok:
		return LimitsRequest{}, nil
	case len(ids) > 1:
		return LimitsRequest{}, &AdminRequestError{Member: "identity", Problem: "given more than once"}
	case ids[0] == "":
		return LimitsRequest{}, &AdminRequestError{Member: "identity", Problem: "empty: omit it to show every identity with an entry"}
	}
	req := LimitsRequest{Identity: ids[0]}
	return req, req.Check()
}

// DecodeLimitsReset reads the body of POST /v1/admin/limits/reset: one
// JSON object of valid UTF-8, at most MaxLimitsResetBodyBytes, with the
// string members identity (required), verb and bucket (optional, spelt as
// vocab spells them) and no other, none twice, none null.
func DecodeLimitsReset(body []byte) (LimitsResetRequest, error) {
	var req LimitsResetRequest
	bad := func(member, format string, args ...any) (LimitsResetRequest, error) {
		return LimitsResetRequest{}, &AdminRequestError{Member: member, Problem: fmt.Sprintf(format, args...)}
	}
	if len(body) > MaxLimitsResetBodyBytes {
		return bad("body", "%d bytes, more than %d", len(body), MaxLimitsResetBodyBytes)
	}
	if !utf8.Valid(body) {
		return bad("body", "not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad("body", "not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("body", "not a JSON object: %v", err)
		}
		name, _ := tok.(string) // a key is always a string
		if seen[name] {
			return bad(quoteMember(name), "given twice")
		}
		seen[name] = true
		tok, err = dec.Token()
		if err != nil {
			return bad("body", "not a JSON object: %v", err)
		}
		s, isString := tok.(string)
		switch {
		case name != "identity" && name != "verb" && name != "bucket":
			return bad(quoteMember(name), "unknown member (the members are identity, verb and bucket; an unknown one is refused, not ignored, so a misspelling never widens a reset)")
		case tok == nil:
			return bad(name, "null: omit the member instead")
		case !isString:
			return bad(name, "must be a string")
		}
		switch name {
		case "identity":
			req.Identity = s
		case "verb":
			v, err := vocab.ParseVerb(s)
			if err != nil {
				return bad("verb", "%v", err)
			}
			req.Verb = &v
		case "bucket":
			b, err := vocab.ParseBucket(s)
			if err != nil {
				return bad("bucket", "%v", err)
			}
			req.Bucket = &b
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bad("body", "not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("body", "more than one JSON value")
	}
	return req, req.Check()
}

// quoteMember names a member a caller sent, bounded and quoted unless it
// is one of the three.
func quoteMember(name string) string {
	switch name {
	case "identity", "verb", "bucket":
		return name
	}
	return vocab.QuoteBounded(name)
}
