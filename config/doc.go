// Package config loads and checks the registrar-otel configuration: a TOML
// file with a [registrar] and a [telemetry] table, read with koanf, overridden
// by environment variables, and checked strictly so that an operator's typo
// produces an error naming the key, the value and the rule.
//
// # Sources and precedence
//
// Load layers, lowest first:
//
//  1. the embedded defaults (Default), which are all the daemon needs: with
//     no file at all, `make run` works;
//  2. the TOML file, when a path is given;
//  3. environment variables REGISTRAR_OTEL_<TABLE>__<KEY>, where "__"
//     separates levels and names are lowercased:
//     REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600 sets
//     registrar.rate_limit_admission_burst,
//     REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY=one-per-host
//     sets registrar.components.edge.multiplicity, and
//     REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT= (empty) disables OTLP export.
//     An integer key takes decimal digits only (no sign, space, "0x" or "_").
//     A variable that names no key ("__" with nothing between) or that sets
//     a key another variable uses as a table is an error. A component whose
//     name contains '-' cannot be spelled in a shell variable name: configure
//     it in the file.
//
// Components are the exception to layering: without a file the defaults
// configure three example components, review (many-per-host), edge-proxy
// (one-per-host) and control-plane (one-per-deployment); with a file the
// components are exactly those of the file (plus the environment), so an
// operator can remove the examples.
//
// # [registrar]
//
//	key                                                type    default                  rule
//	socket_path                                        path    "var/run/registrar.sock" non-empty, at most 107 bytes (a unix socket address)
//	socket_group                                       string  "" (socket 0600)         a group name or gid that exists; the socket is then 0660 in that group
//	tls_listen                                         string  "" (no TCP listener)     host:port; when set, the three tls_*_file keys are required
//	tls_cert_file, tls_key_file, tls_client_ca_file    path    ""                       PEM files of the mTLS listener
//	state_dir                                          path    "var/lib"                non-empty; the embedded backend's bbolt file
//	audit_record_dir                                   path    "var/audit"              non-empty
//	audit_max_file_bytes                               u64     8388608 (bytes)          at least 65536
//	audit_max_retained_files                           u32     16 (files)               greater than 0
//	audit_store_reserve_bytes                          u64     268435456 (bytes)        0 (no reserve) to 1152921504606846976 (1 EiB)
//	rate_limit_admission_burst                         u32     512 (tokens)             greater than 0
//	rate_limit_admission_refill_interval_ms            u32     500 (ms per token)       greater than 0
//	rate_limit_predecision_refusal_burst               u32     32 (tokens)              greater than 0
//	rate_limit_predecision_refusal_refill_interval_ms  u32     1000 (ms per token)      greater than 0
//	rate_limit_coalesce_window_seconds                 u32     60 (seconds)             greater than 0
//	maintenance_interval_ms                            u32     1000 (ms)                greater than 0
//	max_wrap_ttl_seconds                               u32     1800 (seconds)           greater than 0
//	unix_max_conns                                     u32     128 (connections)        1 to 65536
//	tls_max_conns                                      u32     128 (connections)        1 to 65536
//	tls_handshake_max_conns                            u32     32 (connections)         1 to 65536
//	tls_handshake_timeout_ms                           u32     3000 (ms)                1 to 600000
//	max_conns_per_identity                             u32     64 (connections)         1 to 65536
//	read_header_timeout_ms                             u32     3000 (ms)                1 to 600000
//	idle_timeout_ms                                    u32     15000 (ms)               1 to 600000
//	backend                                            string  "embedded"               "embedded" or "openbao"
//	log_level                                          string  "info"                   "debug", "info", "warn" or "error", any case; live on reload; serve --log-level overrides it
//
// The configuration file is opened once (O_NOFOLLOW|O_NONBLOCK), checked by
// fstat on that descriptor and read from it. One that is group- or
// world-writable, owned by neither root nor this user, or a symlink is
// refused (*UnsafeFileError): whoever can change it can disable the
// limiter. A FIFO, a device or a directory is refused at once (*FileError). Errors never repeat an OTLP endpoint's user-info, query or
// fragment (RedactURL).
//
// Each component is a table [registrar.components.<name>] with one key,
// multiplicity = "one-per-deployment" | "one-per-host" | "many-per-host". The
// name must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not
// starting or ending with '-') because it is part of derived registration ids.
//
// # [telemetry]
//
//	key                 type    default            rule
//	metrics_listen      string  "127.0.0.1:9464"   host:port; "" disables the /metrics listener
//	otlp_endpoint       string  "" (no export)     an http:// or https:// URL with a host
//	service_name        string  "registrar-otel"   non-empty
//	trace_sample_per_million  integer  10000       0 to 1000000 root traces in a million (10000 is 1 in 100)
//	otlp_traces_endpoint   string  "" (follow otlp_endpoint)  full OTLP/HTTP traces URL, or "none" (no spans sent)
//	otlp_metrics_endpoint  string  "" (follow otlp_endpoint)  full OTLP/HTTP metrics URL, or "none" (no metrics sent)
//
// # Strictness and errors
//
// Integers are strict: a negative, fractional, string, boolean or
// out-of-range value is an error, never a coercion (koanf's usual decoding
// would turn "512" into 512; this package never decodes with weak typing, it
// walks the parsed values itself). Every error is a *KeyError whose message
// starts with the dotted key and states the rule and the offending value:
//
//	registrar.rate_limit_predecision_refusal_burst must be an unsigned integer, got -3
//	registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
//
// A TOML integer may be written in any TOML form (1_000, 0x3e8); a host:port
// is an optional host and a numeric port 0..65535 (0: any free port).
//
// Load reports all errors at once, joined with errors.Join. The only errors
// that name no key are a file that cannot be read (*FileError) and a file
// that is not TOML (*SyntaxError, naming the file, line and column).
//
// # Unknown keys
//
// Keys of [registrar] that this version does not know are kept, their values
// untouched, in Registrar.Extra (other work adds keys on its own schedule);
// unknown keys elsewhere are ignored. Every unknown key is logged once at
// warn level with the attribute "key", so a typo is visible. Config check
// (`registrar-otel config check --config F`) prints every error and exits 2.
//
// # In code
//
// Config is a plain value, safe for concurrent reads; Load keeps no state and
// is safe for concurrent use. A Config built in code (a test's) can be
// checked against the same rules with Config.Validate.
package config
