package openbao

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/openbao/openbao/api/v2"
)

// checkName is the registration (and service) name CheckPolicy asks about:
// any one name stands for all, since the token policy's paths use `+`.
const checkName = "registrar-otel-check"

// probeRole is a role name the AppRole backend refuses (a trailing hyphen
// is not a role name), so a probe the token's policy wrongly admits is
// answered 404 by the backend and changes nothing; a policy that refuses it
// answers 403 before any backend sees it.
const probeRole = "registrar-otel-check-"

// Refused and Allowed are the results of a parameter probe (a request the
// server must refuse with 403 before it reaches the AppRole backend).
const (
	Refused = "refused"
	Allowed = "allowed"
)

// PolicyCheck is one question CheckPolicy asked the server about the
// token: the capabilities it holds on a path (sys/capabilities-self), or
// whether a request with parameters the token policy does not admit is
// refused (a probe).
type PolicyCheck struct {
	// Path is the path asked about.
	Path string
	// What says what the registrar uses the path for, or why the token
	// must not have it.
	What string
	// Want is what the token must hold exactly: capabilities in the
	// server's order, ["deny"] for none; for a probe, [Refused].
	Want []string
	// Got is the server's answer.
	Got []string
}

// Missing lists the capabilities Want has and Got lacks (the markers
// "deny" and Refused are no capability).
func (c PolicyCheck) Missing() []string { return minus(c.Want, c.Got) }

// Extra lists what the token holds beyond Want: capabilities, or Allowed
// for a probe the server let past the policy.
func (c PolicyCheck) Extra() []string { return minus(c.Got, c.Want) }

// OK reports that the token holds exactly Want.
func (c PolicyCheck) OK() bool { return slices.Equal(c.Got, c.Want) }

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if x != "deny" && x != Refused && !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// CheckUnreachableError is CheckPolicy's error when the server gave no
// usable answer (no connection, a timeout, a 5xx such as a sealed server):
// nothing could be checked.
type CheckUnreachableError struct{ Err error }

func (e *CheckUnreachableError) Error() string {
	return "openbao: check: the server gave no answer: " + e.Err.Error()
}

func (e *CheckUnreachableError) Unwrap() error { return e.Err }

// CheckPolicy asks the server what the backend's token holds, on every
// path the backend uses and on paths it must not have (any policy, a custom
// secret id, a chosen role id, a service's secrets, other auth and sys
// paths), and probes the role and secret-id writes with parameters the
// token policy must refuse. Each check passes when the token holds exactly
// what TokenPolicy grants. It changes nothing on the server, whatever the
// token holds: a probe the policy wrongly admits reaches a role name the
// AppRole backend refuses.
//
// A token the server refuses sys/capabilities-self (invalid, expired, or
// without that path) gets the one failing check naming it. The error is a
// *CheckUnreachableError when the server gave no usable answer, else the
// server's 4xx answer to a check.
func (b *Backend) CheckPolicy(ctx context.Context) ([]PolicyCheck, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	bindings := path.Join(b.kvMount, "data", b.prefix, "bindings", checkName)
	meta := path.Join(b.kvMount, "metadata", b.prefix, "bindings", checkName)
	role := path.Join("auth", b.approle, "role", checkName)
	deny := []string{"deny"}
	checks := []PolicyCheck{
		{bindings, "the binding: claim, read, activate", []string{"create", "read", "update"}, nil},
		{meta, "the binding's versions: deleted at deregister", []string{"delete"}, nil},
		{path.Dir(meta) + "/", "the bindings' list: the instance ceilings are counted from it at start", []string{"list"}, nil},
		{role, "the role: written at each mint, deleted at deregister", []string{"create", "delete", "update"}, nil},
		{role + "/role-id", "the role id: read, never written", []string{"read"}, nil},
		{role + "/secret-id", "a wrapped secret id per mint; the accessors' list (a mint destroys all but its own)", []string{"list", "update"}, nil},
		{role + "/secret-id-accessor/destroy", "a mint destroys every secret id but its own", []string{"update"}, nil},
		{"auth/token/lookup-self", "the token's expiry", []string{"read"}, nil},
		{"auth/token/renew-self", "the token's renewal", []string{"update"}, nil},
		{"sys/capabilities-self", "this check", []string{"update"}, nil},
		{"sys/policies/acl/" + checkName, "must not write any policy (its content is any rule)", deny, nil},
		{"sys/policies/acl/" + ServicePolicyName(checkName), "must not write the services' policies", deny, nil},
		{"sys/policies/acl/" + RoleName(checkName), "must not write a registration's policy (as up to 0.9.0)", deny, nil},
		{"sys/policy/" + checkName, "must not write any policy (old endpoint)", deny, nil},
		{role + "/custom-secret-id", "must not choose a secret id", deny, nil},
		{path.Join(b.kvMount, "data", b.prefix, "services", checkName, "x"), "must not read a service's secrets", deny, nil},
		{path.Join("auth", b.approle, "login"), "must not log in as a service", deny, nil},
		{"auth/token/create", "must not create tokens", deny, nil},
		{"sys/auth/" + b.approle, "must not change the AppRole mount", deny, nil},
		{"identity/entity", "must not write identities", deny, nil},
	}
	paths := make([]string, len(checks))
	for i, c := range checks {
		paths[i] = c.Path
	}
	rctx, cancel := context.WithTimeout(ctx, b.timeout)
	s, err := b.client.Logical().WriteWithContext(rctx, "sys/capabilities-self", map[string]any{"paths": paths})
	cancel()
	if re, ok := errors.AsType[*api.ResponseError](err); ok && re.StatusCode == http.StatusForbidden {
		// Nothing else can be asked: name the one path that is missing.
		return []PolicyCheck{{Path: "sys/capabilities-self", What: "this check (refused: the token is invalid or expired, or its policy lacks it, as 0.9.0's did; nothing else can be checked)",
			Want: []string{"update"}, Got: deny}}, nil
	}
	if err != nil {
		return nil, b.checkError(ctx, "sys/capabilities-self", err)
	}
	if s == nil || s.Data == nil {
		return nil, &CheckUnreachableError{Err: errors.New("sys/capabilities-self answered no data")}
	}
	for i := range checks {
		raw, _ := s.Data[checks[i].Path].([]any)
		got := []string{}
		for _, c := range raw {
			if c, ok := c.(string); ok {
				got = append(got, c)
			}
		}
		if len(got) == 0 {
			got = deny
		}
		slices.Sort(got)
		checks[i].Got = got
	}

	good := map[string]any{
		"token_policies":     ServicePolicyName(checkName),
		"bind_secret_id":     true,
		"secret_id_ttl":      secondsText(b.ttl),
		"secret_id_num_uses": fmt.Sprint(b.uses),
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		m[k] = v
		return m
	}
	probeRolePath := path.Join("auth", b.approle, "role", probeRole)
	probes := []struct {
		what string
		path string
		body map[string]any
		wrap bool
	}{
		{"a role carrying another policy (token_policies=root)", probeRolePath, with("token_policies", "root"), false},
		{"a role carrying a second policy (token_policies=\"" + ServicePolicyName(checkName) + ",root\")", probeRolePath, with("token_policies", ServicePolicyName(checkName)+",root"), false},
		{"a role without a secret id (bind_secret_id=false)", probeRolePath, with("bind_secret_id", false), false},
		{"a role with unlimited secret id uses (secret_id_num_uses=0)", probeRolePath, with("secret_id_num_uses", "0"), false},
		{"a role with another secret id TTL (secret_id_ttl=0s)", probeRolePath, with("secret_id_ttl", "0s"), false},
		{"a role with a chosen role id (role_id)", probeRolePath, with("role_id", checkName), false},
		{"a role with another parameter (token_ttl)", probeRolePath, with("token_ttl", "768h"), false},
		{"a chosen role id (role-id write)", probeRolePath + "/role-id", map[string]any{"role_id": checkName}, false},
		{"a secret id that is not response-wrapped", probeRolePath + "/secret-id", map[string]any{}, false},
		{"a secret id with its own uses (num_uses=0)", probeRolePath + "/secret-id", map[string]any{"num_uses": 0}, true},
	}
	for _, p := range probes {
		got, err := b.probe(ctx, p.path, p.body, p.wrap)
		if err != nil {
			return nil, err
		}
		checks = append(checks, PolicyCheck{Path: p.path, What: "must refuse " + p.what, Want: []string{Refused}, Got: []string{got}})
	}
	return checks, nil
}

// probe writes body to p and reports whether the server refused it with
// 403 (Refused) or let it past the policy (Allowed: the AppRole backend
// then refuses the role name, so nothing is made).
func (b *Backend) probe(ctx context.Context, p string, body map[string]any, wrap bool) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	req := b.client.NewRequest(http.MethodPut, "/v1/"+p)
	if wrap {
		req.WrapTTL = "60s"
	}
	if err := req.SetJSONBody(body); err != nil {
		return "", err
	}
	resp, err := b.client.RawRequestWithContext(rctx, req)
	if resp != nil {
		defer resp.Body.Close()
	}
	if err == nil {
		return Allowed, nil
	}
	if re, ok := errors.AsType[*api.ResponseError](err); ok {
		switch {
		case re.StatusCode == http.StatusForbidden:
			return Refused, nil
		case re.StatusCode < 500:
			return Allowed, nil
		}
	}
	return "", b.checkError(ctx, p, err)
}

// checkError classifies a failed check request: a 4xx is the server's
// answer (returned as is), anything else a *CheckUnreachableError.
func (b *Backend) checkError(ctx context.Context, p string, err error) error {
	if kind, _ := classify(ctx, err); kind == KindClient {
		return fmt.Errorf("openbao: check: %s: %w", p, err)
	}
	return &CheckUnreachableError{Err: fmt.Errorf("%s: %w", p, err)}
}

// FormatCheck is one line of `registrar-otel openbao check`: "ok", or
// "MISSING"/"EXTRA" with what, the path, and the reason.
func FormatCheck(c PolicyCheck) string {
	var b strings.Builder
	missing, extra := c.Missing(), c.Extra()
	switch {
	case c.OK():
		b.WriteString("ok      ")
	case len(extra) > 0:
		b.WriteString("EXTRA   ")
	default:
		b.WriteString("MISSING ")
	}
	b.WriteString(c.Path)
	fmt.Fprintf(&b, " [%s]: %s", strings.Join(c.Got, ", "), c.What)
	if len(missing) > 0 {
		fmt.Fprintf(&b, "; missing %s", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "; extra %s", strings.Join(extra, ", "))
	}
	return b.String()
}
