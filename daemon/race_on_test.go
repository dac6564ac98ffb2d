//go:build race

package daemon

// raceEnabled: the race detector multiplies memory use, so RSS bounds do
// not apply.
const raceEnabled = true
