// Package vocab holds the words every layer of registrar-otel shares: the two
// verbs, the limiter's two buckets, the verb layer's refusal reasons, the
// outcome classes, a component's multiplicity and the DNS-label rule that
// service names, hosts and component names follow.
//
// It is a leaf: it imports nothing of the module, so the audit storage
// format, the wire protocol, the configuration and the limiter can all name
// a verb or a reason without importing one another. Each enum is a small
// unsigned integer spelt by an [Enum] table, the one place that turns a value
// into its text and back; every value of this package is safe for concurrent
// use (the tables are never written after package initialisation).
package vocab
