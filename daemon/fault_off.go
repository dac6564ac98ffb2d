//go:build !registrar_faults

package daemon

import "context"

// faultTickStall is the production twin of the test build's tick stall
// (fault_on.go): nothing, inlined away.
func faultTickStall(context.Context) {}
