package wire

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync/atomic"
)

// wireIDs issues the request ids of answers no verb produced (malformed
// requests, internal errors): "wire." + base64url of 9 random bytes drawn
// once per server + "." + a sequence number. The "wire." prefix keeps
// them apart from the verbs' ids, which name audit records; these never
// do.
type wireIDs struct {
	prefix string
	seq    atomic.Uint64
	// fixed replaces the generator in tests (golden fixtures).
	fixed func() string
}

func newWireIDs() (*wireIDs, error) {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("wire: request id prefix: %w", err)
	}
	return &wireIDs{prefix: "wire." + base64.RawURLEncoding.EncodeToString(b[:]) + "."}, nil
}

func (w *wireIDs) next() string {
	if w.fixed != nil {
		return w.fixed()
	}
	return w.prefix + strconv.FormatUint(w.seq.Add(1), 10)
}
