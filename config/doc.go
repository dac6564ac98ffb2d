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
//     no file at all, `make run` works (koanf's confmap provider);
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
// # The keys
//
// Each key is declared once, as a row of the key table in keys.go: its
// name, type, default, rule, reload class and one-line meaning. Loading,
// Default, Validate, the environment variable, Keys, ReloadClass, Diff and
// Table (what the documentation's key tables are checked against) derive
// from the rows. The operator's reference is docs/en/configuration.md.
//
// The configuration file is opened once (O_NOFOLLOW|O_NONBLOCK), checked by
// fstat on that descriptor and read from it. One that is group- or
// world-writable, owned by neither root nor this user, or a symlink is
// refused (*UnsafeFileError): whoever can change it can disable the
// limiter. A FIFO, a device or a directory is refused at once (*FileError). Errors never repeat an OTLP endpoint's user-info, query or
// fragment (RedactURL).
//
// Each component is a table [registrar.components.<name>] with the key
// multiplicity = "one-per-deployment" | "one-per-host" | "many-per-host"
// (Registrar.Components) and, for a many-per-host component only, the
// instance ceiling max_instances_per_host (Registrar.MaxInstancesPerHost).
// The name must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not
// starting or ending with '-') because it is part of derived registration ids.
//
// Each caller policy is a table [registrar.callers.<name>] (Registrar.Callers,
// sorted by name): the identities and identity prefixes it applies to, any
// of the four rate_limit_* bucket sizes, a size it does not set being the
// [registrar] key's, and what its callers may do and hold: the scope_services,
// scope_components, scope_hosts and scope_verbs patterns (a key left out
// permits any value), scope_owner and max_registrations. An optional
// [registrar.callers.<name>.shadow] table holds candidate sizes, a size it
// does not set being the policy's. Which policy an identity takes is the
// callers package's rule (exact identity, else the longest prefix, else
// none: refused no_policy unless an operator's), and Validate checks names,
// identities and duplicates by building its Matcher
// (Registrar.CallersMatcher), a scope's patterns by compiling it
// (callers.CompileScope), and that a component scope names configured
// components and "{identity}" a policy whose identities can name a host.
// Unlike [registrar]'s, an unknown key in a policy is an error, and neither
// the lists nor what a policy's callers may do can be set from the
// environment. Config.AuthorizationWarnings names a listener that admits
// callers no policy can match.
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
