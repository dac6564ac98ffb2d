// Package audit is the registrar's audit record store: the durable evidence
// every verb writes and every operator reads.
//
// # Format
//
// The store is append-only JSON Lines. Each line is one record with keys in
// a fixed order and optional keys omitted (never null, never ""):
//
//	record_version (always 1), phase, ts, request_id, verb, caller_identity,
//	caller_subuid?, requested {service_name, host, instance?, reload?}, registration_id, outcome
//	{class, reason?, detail?}, limited_bucket, policy?, shadow?, count,
//	window_start, window_end, action, subject {...}, truncated, chain?
//
// One Record type carries the four phases. An admitted invocation writes
// an intent before any work and an outcome after it, paired by request_id;
// both carry what was requested, a mint's with its spec.reload (the
// command the host is asked to run) when the spec has one, a deregister's
// never.
// Invocations the limiter suppressed write nothing themselves; the
// coalescer writes one limited (counted) record per closed window per
// (caller identity, verb, limited bucket, caller policy, shadow), which
// carries no request_id, requested, registration_id or outcome. Its policy
// key names the caller policy whose sizes the bucket had, omitted for the
// default one; "shadow": true marks a record that counts shadow charges
// (calls the policy's candidate sizes would have limited, none limited for
// that reason), omitted otherwise: a line of the default policy without a
// shadow is byte for byte what it was before policies existed. An admin
// record names an action taken on the daemon's own state (action, a closed
// enum), who took it (caller_identity) and what it was taken on (subject,
// whose keys the action fixes); it has no verb. New actions extend that one
// phase (admin.go): limits_reset, an operator's refill of an identity's
// buckets, rotated, what retention leaves of a generation it deletes
// (rotated.go), and sealed, a sealed store's end of an epoch (seal.go).
// A sealed store ends every line with its chain value (chain). Timestamps
// are RFC 3339 UTC with exactly millisecond precision (TimeLayout).
//
// # Field bound
//
// The attacker-influenced strings (caller_identity,
// requested.service_name, requested.host, requested.reload,
// outcome.detail, subject.identity) are cut to
// MaxFieldBytes on a UTF-8 character boundary (a straddling multibyte
// character is dropped, not split); each cut field gets a truncated entry
// with the SHA-256 and byte length of the complete original. The store
// applies the bound on every append, so no line exceeds MaxRecordBytes,
// which is computed from the bounds with worst-case JSON escaping. Strings
// are escaped so that no value can end a line or forge a record: control
// bytes, quotes, backslashes, U+2028/U+2029 and invalid UTF-8 (written as
// \ufffd) are all escaped.
//
// # Guarantees of the store
//
// Store.Append and Store.AppendBatch are the two write paths, on one commit
// path, and neither has a best-effort mode: a record's line is written whole
// and fsynced before its write returns nil. A failed write
// is truncated away, so the file only ever holds whole lines; if even that
// fails the store refuses every later append (ErrBroken). The directory is
// 0700, files 0600, and no symlink is ever followed. The active file
// rotates at Options.MaxFileBytes into generations whose names sort oldest
// first; at most Options.MaxRetainedFiles are kept.
//
// # Knowing when evidence is at risk
//
// Before every write the store checks that the configured directory and
// active path still name the open directory and file (device and inode);
// if not (deleted, renamed, replaced, directory removed) it reopens a fresh
// active file there with the start-up rules, logs at ERROR and counts the
// ReopenCause (Store.Stats), and if the reopen fails the append fails (fail
// closed). Store.Reopen does the same on request (SIGHUP). Failed appends
// are logged at ERROR at most once per phase and failed step per
// Options.ErrorLogInterval, the next line carrying the suppressed count.
// CapacityProbe, run on the daemon tick, measures free space (statfs), the
// store's bytes and its rotation budget and classifies them (Classify) as
// ok, low, critical or unwritable.
//
// # Sealing
//
// A store opened with a sealing key (Options.Seal, the key file `registrar-otel
// audit seal init` creates in registrar.state_dir) chains every line it
// writes: each carries, last, a chain value, a MAC under the current
// epoch's key of the previous line's value and its own bytes. The key
// evolves one way at each start, rotation and stop and at least every
// SealInterval, the old one erased from the key file and from memory,
// after a sealed admin record closes its epoch. Store.SealHead is the
// chain's head, which the daemon logs to the journal, out of its own
// uid's reach; Verify with the verification key checks the chain over
// every line, and with the logged heads (ReadHeads) the store's tail
// (seal.go, sealverify.go). A store without a key writes exactly what it
// wrote before sealing existed.
//
// # Reading
//
// Unmarshal is the strict reader: a line is accepted only if it is exactly
// what the writer produces for some valid record. Scan reads the store
// (read-only) and reports intents without outcome (after a settle grace),
// malformed lines (each rule evaluated per phase; duplicates of a
// request_id included), anomalies of the directory (records that stop
// without an active file, generation gaps, unreadable store files), every
// file it did not read with the reason, a per-bucket summary of limited
// records and, apart from it, of shadow records, both per caller policy,
// and the admin records by action. The
// command `registrar-otel audit scan` prints its Report.
package audit
