package vocab

// OutcomeClass is the class of a verb's outcome as the audit store records
// it: four successes and refused. The zero value is not a class.
type OutcomeClass uint8

// The five outcome classes.
const (
	ClassFirstMint OutcomeClass = iota + 1
	ClassIdempotentRemint
	ClassIdentityRemoved
	ClassIdempotentAlreadyAbsent
	ClassRefused
)

var outcomeClasses = NewEnum[OutcomeClass]("OutcomeClass", "outcome class", []string{
	ClassFirstMint:               "first_mint",
	ClassIdempotentRemint:        "idempotent_remint",
	ClassIdentityRemoved:         "identity_removed",
	ClassIdempotentAlreadyAbsent: "idempotent_already_absent",
	ClassRefused:                 "refused",
})

// Valid reports whether c is one of the five classes.
func (c OutcomeClass) Valid() bool { return outcomeClasses.Valid(c) }

// String returns the spelling, e.g. "first_mint" or "refused"
// (OutcomeClass(N) for an invalid value).
func (c OutcomeClass) String() string { return outcomeClasses.String(c) }

// MarshalText implements encoding.TextMarshaler; an invalid class is an
// error.
func (c OutcomeClass) MarshalText() ([]byte, error) { return outcomeClasses.MarshalText(c) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// five spellings.
func (c *OutcomeClass) UnmarshalText(b []byte) error { return outcomeClasses.UnmarshalText(c, b) }

// ParseOutcomeClass parses an outcome class spelling (exact, no case
// folding).
func ParseOutcomeClass(s string) (OutcomeClass, error) { return outcomeClasses.Parse(s) }
