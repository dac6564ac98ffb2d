package wire

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync/atomic"
)

// RequestIDs issues the request ids of answers no verb produced (malformed
// requests, internal errors): "wire." + base64url of 9 random bytes drawn
// once per server + "." + a sequence number. The "wire." prefix keeps
// them apart from the verbs' ids, which name audit records; these never
// do. Safe for concurrent use.
type RequestIDs struct {
	prefix string
	seq    atomic.Uint64
}

// NewRequestIDs draws a fresh prefix.
func NewRequestIDs() (*RequestIDs, error) {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("wire: request id prefix: %w", err)
	}
	return &RequestIDs{prefix: "wire." + base64.RawURLEncoding.EncodeToString(b[:]) + "."}, nil
}

// Next returns the next id.
func (w *RequestIDs) Next() string {
	return w.prefix + strconv.FormatUint(w.seq.Add(1), 10)
}
