# registrar-otel — run `make` (or `make help`) for the targets.

GO          ?= go
BIN         := bin/registrar-otel
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 10s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/registrar-otel
	$(GO) build -o $(BIN) ./cmd/registrar-otel

.PHONY: run
run: build ## the daemon on embedded defaults (no config file; state under ./var/)
	./$(BIN) serve

.PHONY: deps
deps: ## install what the tests need beyond Go when missing: promtool and prometheus (Debian's prometheus package; needs root)
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then \
	  echo "promtool and prometheus present"; \
	else \
	  echo "installing Debian's prometheus package (promtool, prometheus) for the rule and scrape tests"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
	fi

.PHONY: test
test: deps vet dashboards-check ## go vet, promtool rule tests, the race-enabled suite (golden, end-to-end, real Prometheus), every benchmark once
	$(GO) test -race -count=1 ./...
	$(MAKE) bench-smoke

.PHONY: e2e
e2e: ## only the end-to-end tests: the real binary, socket, Prometheus server and OTLP receiver
	$(GO) test -race -count=1 -run 'TestEndToEnd|TestSIGTERM|TestPrometheus|TestWave' -v ./cmd/registrar-otel

.PHONY: dashboards-check
dashboards-check: ## promtool check/test the alert rules and validate the Grafana dashboard
	promtool check rules dashboards/alerts.yml
	cd dashboards && promtool test rules alerts_test.yml
	$(GO) test -count=1 ./dashboards

.PHONY: vet
vet: ## go vet both modules
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

.PHONY: bench-smoke
bench-smoke: ## run every benchmark once so none rots
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./...
	cd bench && $(GO) test -run='^$$' -bench=. -benchtime=1x ./...

.PHONY: bench
bench: ## the benchmarks, with the peer comparison (bench/ module)
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	cd bench && $(GO) test -run='^$$' -bench=. -benchmem -count=3 ./...

.PHONY: fuzz-smoke
fuzz-smoke: ## run each fuzz target for FUZZTIME (default 10s)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

GOLDEN_PKGS := ./audit ./config ./telemetry ./wire

.PHONY: golden
golden: ## regenerate the golden fixtures (audit lines, config errors, wire payloads, /metrics names); review the diff
	$(GO) test -count=1 $(GOLDEN_PKGS) -run 'Golden|InvalidFixtures' -update
	@git status --short -- $(addsuffix /testdata,$(GOLDEN_PKGS))

.PHONY: lint
lint: vet ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

.PHONY: clean
clean: ## remove build output (never var/)
	rm -rf bin

VAULT_BIN := var/tools/vault/bin/vault

.PHONY: vault
vault: ## build the Vault server the openbao backend's integration tests run (var/tools/vault/bin/vault; ~10 min cold, skipped when present)
	tools/vault/build.sh
