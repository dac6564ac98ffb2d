package registrar

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"
)

// keyedMutex is one mutex per registration id, shared by both verbs, so a
// mint and a deregister of one id never interleave. Entries live only while
// held or awaited, so the map is bounded by the invocations in flight.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks key's mutex and returns its unlock.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyedEntry)
	}
	e, ok := k.m[key]
	if !ok {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// requestIDs issues request ids: base64url of 9 random bytes drawn once per
// process, '.', and a process-wide sequence number. Unique per invocation,
// opaque to callers, at most 33 bytes.
type requestIDs struct {
	prefix string
	seq    atomic.Uint64
}

func newRequestIDs() (*requestIDs, error) {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("registrar: request id prefix: %w", err)
	}
	return &requestIDs{prefix: base64.RawURLEncoding.EncodeToString(b[:]) + "."}, nil
}

// maxRequestIDBytes is the longest request id: a 13-byte prefix and a
// uint64 of at most 20 digits.
const maxRequestIDBytes = 33

// nextIn writes the next request id into buf and returns it as a string
// sharing buf's memory, without a copy. buf must never be written again:
// the caller hands over a buffer inside the invocation it allocates anyway,
// so the id costs no allocation of its own.
func (r *requestIDs) nextIn(buf *[maxRequestIDBytes]byte) string {
	b := append(buf[:0], r.prefix...)
	b = strconv.AppendUint(b, r.seq.Add(1), 10)
	return unsafe.String(&buf[0], len(b))
}
