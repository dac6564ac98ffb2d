package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// PathLimits is the administrative endpoint of `registrar-otel limits
// show`: GET, with the identity to show as the query parameter identity
// (?identity=ID; without it, every identity that has an entry in the
// limiter's map), answers 200 with a LimitsAnswer. Only the daemon's uid
// and root may ask, over the unix socket (AdminForbidden, 403, for anyone
// else).
const PathLimits = "/v1/admin/limits"

// PathLimitsReset is the administrative endpoint of `registrar-otel limits
// reset`: POST with a LimitsResetRequest (application/json) refills one
// identity's buckets to their burst, records the reset in the audit store,
// and answers 200 with a LimitsResetAnswer. Only the daemon's uid and root
// may ask, over the unix socket.
const PathLimitsReset = "/v1/admin/limits/reset"

// MaxLimitsResetBodyBytes bounds a reset request's body (8 KiB): the
// longest identity (MaxIdentityBytes) written with every byte escaped as
// \u00XX is 3,072 bytes, the verb and bucket under 200 more.
const MaxLimitsResetBodyBytes = 8 << 10

// MaxLimitsAnswerBytes bounds a LimitsAnswer as sent (4 MiB), above the
// verbs' MaxResponseBytes: every identity of a full map (at most 512, one
// entry each) with the longest identity and a shadow on every bucket is
// about 1.3 MB (TestLimitsAnswerOfAFullMapFitsItsBound). A daemon whose
// answer would exceed it answers AdminFailed instead.
const MaxLimitsAnswerBytes = 4 << 20

// Pool names the half of the limiter's map an identity's entries are kept
// in: unix-socket callers in the local pool, certificate identities in the
// remote one, each with its own cap and its own overflow buckets.
type Pool string

// The two pools.
const (
	PoolLocal  Pool = "local"
	PoolRemote Pool = "remote"
)

// KeyState says where an identity's next charge of one (verb, bucket)
// would fall.
type KeyState string

// The three states of a key.
const (
	// KeyEntry: the key has its own bucket in the limiter's map; the
	// numbers are that bucket's.
	KeyEntry KeyState = "entry"
	// KeyAbsent: no entry; the next charge inserts one holding the full
	// burst (an entry reclaimed at full burst looks the same).
	KeyAbsent KeyState = "absent"
	// KeyOverflow: no entry, and the identity's pool is at its cap with
	// every entry drained: the next charge falls on the pool's shared
	// overflow bucket of (verb, bucket), whose numbers these are.
	KeyOverflow KeyState = "overflow"
)

// LimitsRequest asks for the limiter's state of one identity, or of every
// identity that has an entry in the map.
type LimitsRequest struct {
	// Identity is the caller identity as the audit records name it
	// (unix-peer:uid=N, registrar-client:uri:…, registrar-client:dns:…);
	// empty asks for every identity with an entry.
	Identity string `json:"identity,omitempty"`
}

// Check reports a request the daemon would refuse as AdminBadRequest: an
// identity that no caller can have (CheckIdentity). Empty is allowed.
func (r LimitsRequest) Check() error {
	if r.Identity == "" {
		return nil
	}
	return CheckIdentity(r.Identity)
}

// LimitsAnswer is the answer of GET /v1/admin/limits.
type LimitsAnswer struct {
	// Identities are the identities asked for, sorted by identity: the one
	// named (with its state absent in every bucket when it has no entry:
	// its next charge starts a full bucket), or every identity with at
	// least one entry in the map. Never null.
	Identities []IdentityLimits `json:"identities"`
	// Overflow is each pool's overflow buckets, local first. Never null.
	Overflow []PoolOverflow `json:"overflow"`
}

// IdentityLimits is one identity's four buckets.
type IdentityLimits struct {
	Identity string `json:"identity"`
	// Policy is the caller policy whose sizes the identity's buckets have:
	// a [registrar.callers.NAME] table's NAME, or "default".
	Policy string `json:"policy"`
	// Pool is the half of the map its entries are kept in.
	Pool Pool `json:"pool"`
	// Buckets are the four (verb, bucket) keys in vocab order: mint
	// predecision_refusal, mint admission, deregister predecision_refusal,
	// deregister admission.
	Buckets []KeyLimits `json:"buckets"`
}

// KeyLimits is one (identity, verb, bucket) key: the enforced bucket's
// state and numbers, and its shadow bucket's when the policy has shadow
// sizes.
type KeyLimits struct {
	Verb   vocab.Verb   `json:"verb"`
	Bucket vocab.Bucket `json:"bucket"`
	BucketLimits
	// Shadow is the shadow bucket (the policy's candidate sizes, charged
	// beside the enforced ones and never enforced); null when the policy
	// has no shadow sizes.
	Shadow *BucketLimits `json:"shadow"`
}

// BucketLimits is one bucket's state and numbers.
type BucketLimits struct {
	State KeyState `json:"state"`
	// Burst is the bucket's capacity in tokens.
	Burst uint32 `json:"burst"`
	// RefillIntervalMS is the time per token, in milliseconds.
	RefillIntervalMS uint64 `json:"refill_interval_ms"`
	// Tokens is what the bucket holds now; Burst for an absent key.
	Tokens uint32 `json:"tokens"`
	// RetryAfterSeconds is the time until the bucket holds one token,
	// rounded up to whole seconds; 0 when it holds one.
	RetryAfterSeconds uint64 `json:"retry_after_seconds"`
}

// PoolOverflow is one pool's overflow buckets and how full the pool is.
type PoolOverflow struct {
	Pool Pool `json:"pool"`
	// Entries is the pool's entries now; MaxEntries its cap. A pool at its
	// cap with every entry drained sends the charges of identities without
	// an entry to these buckets.
	Entries    int `json:"entries"`
	MaxEntries int `json:"max_entries"`
	// Buckets are the pool's overflow buckets: four per caller policy
	// ("default" first, then the configured policies in order), each
	// policy's in vocab order.
	Buckets []OverflowBucket `json:"buckets"`
}

// OverflowBucket is one of a pool's shared overflow buckets: the one the
// identities of Policy without an entry share while the pool is full.
type OverflowBucket struct {
	Policy            string       `json:"policy"`
	Verb              vocab.Verb   `json:"verb"`
	Bucket            vocab.Bucket `json:"bucket"`
	Burst             uint32       `json:"burst"`
	RefillIntervalMS  uint64       `json:"refill_interval_ms"`
	Tokens            uint32       `json:"tokens"`
	RetryAfterSeconds uint64       `json:"retry_after_seconds"`
}

// LimitsResetRequest asks the daemon to refill one identity's buckets to
// their burst.
type LimitsResetRequest struct {
	// Identity is required.
	Identity string `json:"identity"`
	// Verb, when set, limits the reset to that verb's buckets; nil resets
	// both verbs'.
	Verb *vocab.Verb `json:"verb,omitempty"`
	// Bucket, when set, limits the reset to that bucket of each verb
	// reset; nil resets both buckets.
	Bucket *vocab.Bucket `json:"bucket,omitempty"`
}

// Check reports a request the daemon would refuse as AdminBadRequest: a
// missing or impossible identity, or a verb or bucket out of range.
func (r LimitsResetRequest) Check() error {
	if r.Identity == "" {
		return &AdminRequestError{Member: "identity", Problem: "required: name the identity whose buckets to reset"}
	}
	if err := CheckIdentity(r.Identity); err != nil {
		return err
	}
	if r.Verb != nil && !r.Verb.Valid() {
		return &AdminRequestError{Member: "verb", Problem: fmt.Sprintf("%d is not a verb", uint8(*r.Verb))}
	}
	if r.Bucket != nil && !r.Bucket.Valid() {
		return &AdminRequestError{Member: "bucket", Problem: fmt.Sprintf("%d is not a bucket", uint8(*r.Bucket))}
	}
	return nil
}

// Selects reports whether the request's reset covers (verb, bucket).
func (r LimitsResetRequest) Selects(verb vocab.Verb, bucket vocab.Bucket) bool {
	return (r.Verb == nil || *r.Verb == verb) && (r.Bucket == nil || *r.Bucket == bucket)
}

// LimitsResetAnswer is the answer of POST /v1/admin/limits/reset.
type LimitsResetAnswer struct {
	Identity string `json:"identity"`
	Policy   string `json:"policy"`
	Pool     Pool   `json:"pool"`
	// Reset are the keys the request selected, in vocab order, each with
	// what it held before and what it holds now. Never null.
	Reset []KeyReset `json:"reset"`
	// Recorded reports that the reset is in the audit store, as an
	// administrative record naming who reset what.
	Recorded bool `json:"recorded"`
}

// KeyReset is one key a reset refilled.
type KeyReset struct {
	Verb   vocab.Verb   `json:"verb"`
	Bucket vocab.Bucket `json:"bucket"`
	// Before is the key's state before the reset: an absent key needed no
	// refill (its next charge starts a full bucket); an overflow key's
	// shared overflow bucket is never refilled for one identity.
	Before       KeyState `json:"before"`
	TokensBefore uint32   `json:"tokens_before"`
	// Tokens is what the key holds after the reset: its burst.
	Tokens uint32 `json:"tokens"`
	// ShadowTokens is what the shadow bucket holds after the reset (its
	// shadow burst); null when the policy has no shadow sizes.
	ShadowTokens *uint32 `json:"shadow_tokens"`
}

// Limits asks the daemon for the limiter's state of req.Identity, or of
// every identity with an entry when it is empty. A request Check refuses
// is returned as its *AdminRequestError without being sent; an
// administrative refusal is an *AdminError.
func (c *Client) Limits(ctx context.Context, req LimitsRequest) (*LimitsAnswer, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	u := c.base + PathLimits
	if req.Identity != "" {
		u += "?" + url.Values{"identity": {req.Identity}}.Encode()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	var ans LimitsAnswer
	if err := c.adminCall(hreq, "limits request", MaxLimitsAnswerBytes, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// LimitsReset asks the daemon to refill req's buckets of req.Identity. A
// request Check refuses is returned as its *AdminRequestError without
// being sent; an administrative refusal is an *AdminError.
func (c *Client) LimitsReset(ctx context.Context, req LimitsResetRequest) (*LimitsResetAnswer, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("wire: encode the limits reset request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+PathLimitsReset, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	var ans LimitsResetAnswer
	if err := c.adminCall(hreq, "limits reset", MaxResponseBytes, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// adminCall sends an administrative request whose 200 answer is a JSON
// object of at most limit bytes, decoded into v; any other status is an
// administrative refusal (adminRefusal). what names the request in errors.
func (c *Client) adminCall(hreq *http.Request, what string, limit int64, v any) error {
	resp, err := c.send(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("wire: reading the answer of %s to a %s: %w", c.endpoint, what, err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("%s answered a %s with more than %d bytes", c.endpoint, what, limit)
	}
	if resp.StatusCode != http.StatusOK {
		return c.adminRefusal(resp.StatusCode, body, what)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s answered HTTP 200 to a %s, not its answer: %v: %.200q", c.endpoint, what, err, body)
	}
	return nil
}
