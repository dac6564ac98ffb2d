// Package embedded is the registrar's default Backend: bindings and issued
// identities in a bbolt database, FileName in registrar.state_dir.
//
// # What is stored
//
// Two buckets, keyed by registration id, with JSON values that carry a
// version ("v", always 1 for now) so the format can evolve; a value that
// does not decode, or has another version, is a *CorruptRecordError naming
// the bucket and key, never a panic and never "absent":
//
//	bindings:   {v, host, spec {component, service_name, reload}, role_id, created_at, owner}
//	identities: {v, role_id, secret_sha256, expires_at, issued_at}
//
// Times are UTC with millisecond precision. The role id is a random
// version 4 UUID created by the first mint and kept by every remint; each
// mint issues a fresh wrapped secret id (32 random bytes, base64url without
// padding) that expires at Now + WrapTTL.
//
// # Ownership
//
// owner is the caller identity of the mint that created the binding
// (registrar.MintOp.Owner), kept by every remint whoever makes it, and
// omitted when empty. It came without a new "v": a binding written before
// owners were recorded has none and reads as owner "", so a database of an
// earlier release opens as it is. Whenever the binding exists, Mint and
// Deregister ask the op's MayAct about its owner first, inside the write
// transaction, before the host and spec checks; a refusal
// (registrar.MintNotOwner, registrar.DeregisterNotOwner) writes nothing, so
// the identity record, and with it the secret already delivered, is
// unchanged.
//
// # Reservation and listing
//
// A mint that finds no binding asks the op's Reserve (the verbs' instance
// ceilings) inside the same write transaction, before it writes anything:
// the answer judges the absence that transaction read, and a refusal
// (registrar.MintCeilingReached) writes nothing. A remint never asks it.
// Backend.Registrations (registrar.Lister) lists every binding in one
// read-only transaction, a consistent snapshot; a binding that does not
// decode stops it with a *CorruptRecordError.
//
// # What is never stored
//
// The wrapped secret id itself: only its SHA-256 is kept, and a remint
// replaces it, so the previous secret stops verifying. Backend.VerifySecret
// checks a secret against the hash and expiry without consuming it; single
// use belongs to the unwrap endpoint that will consume it.
//
// # Durability and concurrency
//
// Every Mint and Deregister is decided and written inside a bbolt write
// transaction, and bbolt fsyncs the commit before the call returns. A
// Backend is safe for concurrent use. Concurrent operations share one
// write transaction (group commit): a caller arriving while a commit is in
// progress queues, and when it ends the first queued caller commits
// everything queued meanwhile, so 64 mints in flight cost a few fsyncs
// instead of 64. There is no timer: a lone caller commits at once. Each
// operation's outcome is its own: its reads see the writes of those
// before it in the transaction (so concurrent mints of one registration id
// create it exactly once), an operation that fails leaves no write behind,
// and if one fails half-way through its writes the transaction is thrown
// away and the others run again without it, so none of them fails for it
// or has its effect applied twice. A transaction in which nothing was
// written is rolled back rather than committed. A context already done is
// answered without touching the database; a started transaction is not
// cancelled.
//
// # Locking
//
// bbolt holds an exclusive flock on the database file while it is open. A
// second Open of the same state directory (typically a second daemon) waits
// at most Options.OpenTimeout (DefaultOpenTimeout, 1 s) and then fails with
// an error matching ErrLocked that names the file, instead of hanging.
// The directory is created 0700 and the file kept 0600; a symlinked or
// group/world-writable directory and a symlinked file are refused.
package embedded
