package registrar_test

import (
	"context"
	"maps"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestSetComponentsStopsAcceptingARemovedComponent(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.NewBackend(t))
	if _, err := h.v.Mint(context.Background(), goodMint()); err != nil {
		t.Fatalf("mint before the change: %v", err)
	}
	next := maps.Clone(testComponents)
	delete(next, "review")
	if err := h.v.SetComponents(next); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := h.v.Mint(context.Background(), goodMint()); return err }(),
		func() error { _, err := h.v.Deregister(context.Background(), goodDeregister()); return err }(),
	} {
		if r := asRefused(t, err); r.Reason != vocab.ReasonComponentNotConfigured {
			t.Fatalf("after removing review: %+v, want component_not_configured", r)
		}
	}
	if _, err := h.v.Mint(context.Background(), func() registrar.MintRequest {
		m := goodMint()
		m.Component, m.Spec.Component, m.Instance = "edge-proxy", "edge-proxy", 0
		return m
	}()); err != nil {
		t.Fatalf("a kept component refused: %v", err)
	}
	if err := h.v.SetComponents(map[string]vocab.Multiplicity{"x": 0}); err == nil {
		t.Fatal("SetComponents accepted an invalid multiplicity")
	}
	if _, err := h.v.Mint(context.Background(), func() registrar.MintRequest {
		m := goodMint()
		m.Component, m.Spec.Component, m.Instance = "edge-proxy", "edge-proxy", 0
		m.Host = "h2"
		return m
	}()); err != nil {
		t.Fatalf("a refused SetComponents changed the table: %v", err)
	}
}
