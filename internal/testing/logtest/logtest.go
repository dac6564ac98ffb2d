// Package logtest is a log destination for tests: a buffer a daemon, a
// store or a throttle writes its lines to from many goroutines while the
// test reads them back. It is test support: production code never imports
// it (cmd/registrar-otel's deptest holds that).
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer whose contents can be read while it is written.
// The zero value is empty and ready; it is safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the non-empty lines written so far that contain every one
// of subs (all of them when subs is empty).
func (l *Buffer) Lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
