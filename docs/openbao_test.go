package docs

import (
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
)

// The policies openbao.md shows are the ones the backend uses: the token
// policy the integration tests run every verb with (and openbao check
// compares the token with), and a service's policy the operator writes,
// both for the default mounts and secret id settings.
func TestTheOpenBaoPageShowsTheBackendsOwnPolicies(t *testing.T) {
	want := map[string]string{
		"token policy":   openbao.TokenPolicy("secret", "registrar-otel", "approle", time.Hour, 1),
		"service policy": openbao.ServicePolicy("secret", "registrar-otel", "review"),
	}
	for _, p := range pagesNamed(t, "openbao.md") {
		for name, body := range want {
			found := false
			for _, blk := range p.blocks {
				if blk.info == "hcl" && blk.body == body {
					found = true
				}
			}
			if !found {
				t.Errorf("%s shows no hcl block equal to the backend's %s:\n%s", p.path, name, body)
			}
		}
	}
}
