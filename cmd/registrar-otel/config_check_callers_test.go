package main

import (
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tlsNoPolicyWarning is config check's warning for a TLS listener at addr
// that no caller policy covers (config.Config.AuthorizationWarnings).
func tlsNoPolicyWarning(addr string) string {
	return `registrar.tls_listen "` + addr + `" lets every holder of a client certificate the CA signs call the daemon, but no caller policy can match them (a registrar-client: identity): until one does, every certificate holder is refused no_policy; add a [registrar.callers.<name>] policy with identity_prefixes = ["registrar-client:"] (every certificate) or your certificates' own prefix (e.g. "registrar-client:uri:spiffe://example.org/host/"), scoped with the scope_* keys`
}

// groupNoPolicyWarning is the same for a socket group.
func groupNoPolicyWarning(group string) string {
	return `registrar.socket_group "` + group + `" lets the group's members call the daemon, but no caller policy can match them (a unix-peer:uid=<uid> identity other than root's): until one does, every member of the group is refused no_policy; add a [registrar.callers.<name>] policy with identity_prefixes = ["unix-peer:"] (every local caller) or identities = ["unix-peer:uid=<uid>"] (each member), scoped with the scope_* keys`
}

// TestConfigCheckListsEachPolicysScope: each policy's effective scope, a
// key left out shown as any, its owner and its ceiling, and a component's
// instance ceiling; --json lists the same (golden).
func TestConfigCheckListsEachPolicysScope(t *testing.T) {
	path := filepath.Join("..", "..", "config", "testdata", "valid_callers_scoped.toml")
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	wantContains(t, "stdout", stdout, `components:
  control-plane  one-per-deployment
  edge-proxy     one-per-host
  review         many-per-host, at most 4 live per host (max_instances_per_host)
`, `
  agents:
    identity_prefixes           registrar-client:dns:
    scope                       services: review, edge-*
                                components: review, edge-proxy
                                hosts: {identity}
                                verbs: mint
    scope_owner                 self
    max_registrations           64 live registrations
    admission bucket            burst 512 (default), one token every 500 ms (default)
`, `
  control-plane:
    identity_prefixes           registrar-client:uri:spiffe://example.org/control-plane/
    scope                       services: any
                                components: any
                                hosts: any
                                verbs: any
    scope_owner                 any
    max_registrations           none
`, `
  everyone:
    identity_prefixes           "" (every identity)
    scope                       services: any
                                components: any
                                hosts: any
                                verbs: mint
    scope_owner                 self
`, `
  local:
    identity_prefixes           unix-peer:
    scope                       services: any
                                components: rev?ew
                                hosts: any
                                verbs: *
    scope_owner                 policy
`)

	code, out, stderr := configCheckOutput([]string{"--config", path, "--json"}, nil)
	if code != configCheckOK {
		t.Fatalf("--json: exit %d, stderr:\n%s", code, stderr)
	}
	var res struct {
		Config struct {
			Registrar struct {
				MaxInstancesPerHost map[string]uint32 `json:"max_instances_per_host"`
				Callers             json.RawMessage   `json:"callers"`
			} `json:"registrar"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Config.Registrar.MaxInstancesPerHost; len(got) != 1 || got["review"] != 4 {
		t.Errorf("config.registrar.max_instances_per_host = %v, want review 4", got)
	}
	goldenJSON(t, "config_check_callers_scoped.json", res.Config.Registrar.Callers)
}

// TestConfigCheckRefusesBadScopes: the authorization rules fail the check
// as every key error does, each naming its key.
func TestConfigCheckRefusesBadScopes(t *testing.T) {
	path := writeConfigForCheck(t, `[registrar.components.review]
multiplicity = "many-per-host"
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
max_instances_per_host = 2
[registrar.callers.local]
identity_prefixes = ["unix-peer:"]
scope_components = ["reveiw"]
scope_hosts = ["{identity}"]
scope_owner = "mine"
max_registrations = 0
`)
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	want := `registrar.components.edge-proxy.max_instances_per_host applies only to a many-per-host component: edge-proxy is one-per-host, which holds at most one instance per host already
registrar.callers.local.max_registrations must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the policy's callers)
registrar.callers.local.scope_components[0] names no configured component: the components are edge-proxy, review, got "reveiw"
registrar.callers.local.scope_hosts[0] must not be {identity} in a policy none of whose identities and prefixes can name a host: only a registrar-client:dns: or registrar-client:uri: identity names one (a unix-peer:uid= identity names none), so every call of the policy would be out of scope on host
registrar.callers.local.scope_owner must be "self" (the registrations the caller itself first minted), "policy" (those of any identity of the policy) or "any", got "mine"
` + selfJudged(t) + `
config check: 5 errors in ` + path + "\n"
	if code != configCheckInvalid || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant 2 and:\n%s", code, stdout, stderr, want)
	}
}

// TestConfigCheckWarnsOfAListenerNoPolicyCovers: a socket group or a TLS
// listener whose callers no policy can match is a warning naming the key
// and the fix (exit 0), an error under --strict (exit 2); a policy that
// can match them silences it.
func TestConfigCheckWarnsOfAListenerNoPolicyCovers(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := shortTempDir(t)
	cert, key, ca := validTLSFiles(t, dir)
	unixPolicy := "[registrar.callers.local]\nidentity_prefixes = [\"unix-peer:\"]\n"
	certPolicy := "[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:dns:\"]\n"
	group := `socket_group = "` + g.Name + `"`
	tls := tlsListenLines("127.0.0.1:0", cert, key, ca)
	for _, c := range []struct {
		name, extra, policies string
		want                  []finding
	}{
		{"a group without a policy", group, "", []finding{{"registrar.socket_group", groupNoPolicyWarning(g.Name)}}},
		{"a group with a unix policy", group, unixPolicy, nil},
		{"a TLS listener without a policy", tls, unixPolicy, []finding{{"registrar.tls_listen", tlsNoPolicyWarning("127.0.0.1:0")}}},
		{"a TLS listener with a certificate policy", tls, certPolicy, nil},
		{"both without a policy", group + "\n" + tls, "", []finding{
			{"registrar.socket_group", groupNoPolicyWarning(g.Name)}, {"registrar.tls_listen", tlsNoPolicyWarning("127.0.0.1:0")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfigForCheck(t, serveDoc(dir, c.extra, c.policies))
			code, res := checkJSON(t, "--config", path)
			if code != configCheckOK || !res.OK {
				t.Fatalf("exit %d, errors %+v; want 0", code, res.Errors)
			}
			var got []finding
			for _, w := range res.Warnings {
				if w.Key == "registrar.socket_group" || w.Key == "registrar.tls_listen" {
					got = append(got, w)
				}
			}
			if !equalFindings(got, c.want) {
				t.Errorf("warnings %+v, want %+v", got, c.want)
			}
			code, res = checkJSON(t, "--config", path, "--strict")
			if len(c.want) == 0 {
				if code != configCheckOK {
					t.Errorf("--strict: exit %d, errors %+v; want 0", code, res.Errors)
				}
				return
			}
			if code != configCheckInvalid || res.OK {
				t.Errorf("--strict: exit %d; want 2", code)
			}
			for _, w := range c.want {
				found := false
				for _, e := range res.Errors {
					found = found || e.Key == w.Key && e.Message == w.Message+" (--strict)"
				}
				if !found {
					t.Errorf("--strict: errors %+v lack %q", res.Errors, w.Message+" (--strict)")
				}
			}
		})
	}
	// The text prints it as every warning, on stderr.
	path := writeConfigForCheck(t, serveDoc(dir, group, ""))
	code, _, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckOK || !strings.Contains(stderr, "warning: "+groupNoPolicyWarning(g.Name)+"\n") {
		t.Errorf("text: exit %d, stderr %q; want 0 and the warning", code, stderr)
	}
}

func equalFindings(a, b []finding) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
