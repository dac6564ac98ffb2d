package docs

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// The policies openbao.md shows are the ones the backend uses: the token
// policy the integration tests run every verb with, and a rendered service
// policy, both for the default mounts.
func TestTheOpenBaoPageShowsTheBackendsOwnPolicies(t *testing.T) {
	b, err := openbao.New(openbao.Options{Address: "https://openbao.internal:8200", Token: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"token policy":   openbao.TokenPolicy("secret", "registrar-otel", "approle"),
		"service policy": b.RenderPolicy("web1-review-003", registrar.Spec{Component: "review", ServiceName: "review"}),
	}
	for _, lang := range langs {
		p := loadPage(t, lang, "openbao.md")
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
