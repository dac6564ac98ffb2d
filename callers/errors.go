package callers

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalid matches every error New, CompileScope and NewAuthority return:
// errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("callers: invalid caller policies")

// DefaultName is the name of the default policy, the [registrar] table's
// sizes, which an identity no policy matches takes. No policy may be given
// that name.
const DefaultName = "default"

// MaxIdentityBytes bounds an identity or prefix a policy names: the
// server's own bound on a caller identity (wire.MaxIdentityBytes), so a
// longer one could never match.
const MaxIdentityBytes = 512

// MaxNameBytes bounds a policy name: a DNS label's 63 bytes.
const MaxNameBytes = 63

// DuplicateError is one identity, or one prefix, that two policies name
// (or one policy names twice). Either would make the match depend on the
// order the policies were given in.
type DuplicateError struct {
	// Identity is the identity or prefix named twice.
	Identity string
	// Prefix reports that Identity is an identity prefix.
	Prefix bool
	// First and Second are the names of the policies that name it, in the
	// order given; equal when one policy names it twice.
	First, Second string
	// Index is the position of the second naming in Second's Identities
	// (or IdentityPrefixes).
	Index int
}

func (e *DuplicateError) Error() string {
	if e.First == e.Second {
		return fmt.Sprintf("callers: policy %q names the %s %s twice", e.First, kind(e.Prefix), shorten(e.Identity))
	}
	return fmt.Sprintf("callers: the %s %s is named by policy %q and by policy %q; an identity takes one policy",
		kind(e.Prefix), shorten(e.Identity), e.First, e.Second)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrInvalid }

// NameError is a policy name that cannot name a policy: empty, longer than
// MaxNameBytes, not a DNS label ([a-z0-9-], not starting or ending with
// '-'), DefaultName, or the name of an earlier policy too.
type NameError struct {
	// Name is the name as given.
	Name string
	// Rule is the rule the name breaks, worded to follow the name: "must be
	// a DNS label (…)".
	Rule string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("callers: policy name %s %s", shorten(e.Name), e.Rule)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *NameError) Is(target error) bool { return target == ErrInvalid }

// IdentityError is an identity or prefix no server identity could be, or
// start with: empty, longer than MaxIdentityBytes, or holding a byte
// outside printable ASCII (0x20 to 0x7e).
type IdentityError struct {
	// Policy is the name of the policy that names it.
	Policy string
	// Identity is the identity or prefix as given.
	Identity string
	// Prefix reports that Identity is an identity prefix.
	Prefix bool
	// Index is its position in the policy's Identities (or
	// IdentityPrefixes).
	Index int
	// Rule is the rule the identity breaks, worded to follow it: "must not
	// be empty".
	Rule string
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("callers: policy %q: the %s %s %s", e.Policy, kind(e.Prefix), shorten(e.Identity), e.Rule)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *IdentityError) Is(target error) bool { return target == ErrInvalid }

func kind(prefix bool) string {
	if prefix {
		return "identity prefix"
	}
	return "identity"
}

// maxShown bounds how much of a name or an identity a message repeats.
const maxShown = 80

// shorten quotes s with Go escapes, so no control byte reaches a terminal,
// cut to maxShown bytes.
func shorten(s string) string {
	if len(s) <= maxShown {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxShown]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
