//go:build !unix

package coalesce

// oNoFollow is unix-only; elsewhere the state directory's own checks stand.
const oNoFollow = 0
