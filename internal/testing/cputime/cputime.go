// Package cputime reads the process's CPU time, for benchmarks on shared
// machines: ns/op counts the time a benchmark spent descheduled behind
// other work, CPU time does not. Safe for concurrent use.
package cputime

import "time"

// Now returns the process's user plus system CPU time, or 0 where the
// platform does not say (Available reports which).
func Now() time.Duration { return now() }

// Available reports whether Now reads a real clock on this platform.
func Available() bool { return available }
