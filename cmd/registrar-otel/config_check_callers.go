package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
)

// callerJSON is one caller policy in config check --json, under
// config.registrar.callers: its lists, its enforced and shadow sizes as
// sizesJSON, and what its callers may do and hold.
type callerJSON struct {
	Name             string   `json:"name"`
	Identities       []string `json:"identities"`
	IdentityPrefixes []string `json:"identity_prefixes"`
	// Sizes are the enforced sizes, a key the policy leaves unset holding
	// the [registrar] key's value.
	Sizes sizesJSON `json:"sizes"`
	// Shadow are the shadow sizes, a key the shadow leaves unset holding
	// the enforced value; null without a shadow.
	Shadow *sizesJSON `json:"shadow"`
	// Scope holds the four scope keys' patterns, each null when the key
	// is left out (any value).
	Scope scopeJSON `json:"scope"`
	// ScopeOwner is "self", "policy" or "any".
	ScopeOwner string `json:"scope_owner"`
	// MaxRegistrations is null without a ceiling.
	MaxRegistrations *uint32 `json:"max_registrations"`
}

// scopeJSON is a policy's scope under the keys' names without "scope_".
type scopeJSON struct {
	Services   []string `json:"services"`
	Components []string `json:"components"`
	Hosts      []string `json:"hosts"`
	Verbs      []string `json:"verbs"`
}

// sizesJSON is the four sizes under their key names, numbers, and "set":
// the keys the table set itself. Built from config.CallerSizes.Values, so
// a size key the configuration adds is listed without a change here.
type sizesJSON map[string]any

func sizesOf(s config.CallerSizes) sizesJSON {
	out := sizesJSON{}
	set := []string{}
	for _, v := range s.Values() {
		out[v.Key] = v.Value
		if v.Set {
			set = append(set, v.Key)
		}
	}
	out["set"] = set
	return out
}

// callersOf lists the policies of r, in the configuration's order (by
// name).
func callersOf(r config.Registrar) []callerJSON {
	out := make([]callerJSON, 0, len(r.Callers))
	for _, p := range r.Callers {
		c := callerJSON{Name: p.Name, Identities: nonNil(p.Identities), IdentityPrefixes: nonNil(p.IdentityPrefixes), Sizes: sizesOf(p.EnforcedSizes()),
			Scope:      scopeJSON{Services: p.Scope.Services, Components: p.Scope.Components, Hosts: p.Scope.Hosts, Verbs: p.Scope.Verbs},
			ScopeOwner: p.EffectiveOwner().String()}
		if p.Shadow != nil {
			s := sizesOf(p.ShadowSizes())
			c.Shadow = &s
		}
		if p.MaxRegistrations != 0 {
			n := p.MaxRegistrations
			c.MaxRegistrations = &n
		}
		out = append(out, c)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// printCallers writes the callers section of the summary to w: the rule,
// then for each policy its identities, prefixes, effective scope (a key
// left out shown as any), owner and ceiling, and the two buckets, each
// size marked with where it comes from. The policies' rows align as one
// table, whose name lines carry no padding.
func printCallers(w io.Writer, r *config.Registrar) {
	if len(r.Callers) == 0 {
		fmt.Fprintf(w, "callers: (none: only the operators, root and the daemon's uid on the unix socket, may call, with the [registrar] sizes, policy %s; any other identity is refused no_policy)\n", callers.DefaultName)
		return
	}
	fmt.Fprintln(w, "callers (an identity takes its exact identity's policy, else the longest matching prefix's, else none and is refused no_policy; the operators, root and the daemon's uid on the unix socket, may do anything unless a policy names them exactly):")
	var buf bytes.Buffer
	tw, row := summaryRows(&buf)
	for _, p := range r.Callers {
		fmt.Fprintf(tw, "  %s:\t\n", p.Name) // a cell, so that every policy's rows align
		if len(p.Identities) > 0 {
			row("  identities", strings.Join(p.Identities, ", "))
		}
		if len(p.IdentityPrefixes) > 0 {
			row("  identity_prefixes", strings.Join(showPrefixes(p.IdentityPrefixes), ", "))
		}
		scopeRows(row, p)
		bucketRows(row, "  ", p.EnforcedSizes(), callers.DefaultName)
		if p.Shadow != nil {
			bucketRows(row, "  shadow ", p.ShadowSizes(), "enforced")
		}
	}
	tw.Flush()
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
}

// bucketRows writes the admission and predecision_refusal rows of s, each
// value followed by "(set)" or by where an unset one comes from: the
// default policy's value, or for a shadow the enforced one.
func bucketRows(row func(k, v string), prefix string, s config.CallerSizes, inherited string) {
	from := func(set bool) string {
		if set {
			return "(set)"
		}
		return "(" + inherited + ")"
	}
	v := s.Values()
	for i, bucket := range []string{"admission", "predecision_refusal"} {
		burst, interval := v[2*i], v[2*i+1]
		row(prefix+bucket+" bucket", fmt.Sprintf("burst %d %s, one token every %d ms %s", burst.Value, from(burst.Set), interval.Value, from(interval.Set)))
	}
}

// scopeRows writes what p's callers may do and hold: its effective scope,
// one line a key ("services: any" for a key left out), then its owner and
// its ceiling.
func scopeRows(row func(k, v string), p config.CallerPolicy) {
	s, err := callers.CompileScope(p.Name, p.Scope)
	if err != nil {
		// Not reached: the configuration validated, CompileScope with it.
		row("  scope", "(invalid: "+err.Error()+")")
	} else {
		for i, line := range s.Effective() {
			key := ""
			if i == 0 {
				key = "scope"
			}
			row("  "+key, line)
		}
	}
	row("  scope_owner", p.EffectiveOwner().String())
	ceiling := "none"
	if p.MaxRegistrations != 0 {
		ceiling = fmt.Sprintf("%d live registrations", p.MaxRegistrations)
	}
	row("  max_registrations", ceiling)
}

// showPrefixes is prefixes as the listing shows them: the empty prefix,
// which every identity starts with, as "" (every identity).
func showPrefixes(prefixes []string) []string {
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		if p == "" {
			p = `"" (every identity)`
		}
		out[i] = p
	}
	return out
}
