# registrar-otel — run `make` (or `make help`) for the targets.

GO          ?= go
BIN         := bin/registrar-otel
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GREMLINS    := github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
FUZZTIME    ?= 10s

# What `make build` stamps into internal/buildinfo (the version command,
# registrar_build_info and service.version read it): the one version number
# of the project, the VERSION file (CHANGELOG.md's newest release heading).
VERSION     ?= $(shell cat VERSION)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDINFO   := github.com/registrar-otel/registrar-otel/internal/buildinfo
LDFLAGS     := -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Revision=$(REVISION)

# The OpenTelemetry Collector the real-Collector test runs, built with the
# pinned builder from tools/otelcol/manifest.yaml into an ignored directory
# and reused until the manifest changes.
OTELCOL_BUILDER := go.opentelemetry.io/collector/cmd/builder@v0.165.0
OTELCOL         := var/tools/otelcol/otelcol-registrar

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/registrar-otel, stamped with git describe and the revision
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/registrar-otel

.PHONY: run
run: build ## the daemon on embedded defaults (no config file; state under ./var/)
	./$(BIN) serve

.PHONY: deps
deps: ## install what the tests need beyond Go when missing: promtool and prometheus (Debian's prometheus package), systemd-analyze (Debian's systemd package), newuidmap (Debian's uidmap package); needs root
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then \
	  echo "promtool and prometheus present"; \
	else \
	  echo "installing Debian's prometheus package (promtool, prometheus) for the rule and scrape tests"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
	fi
	@if command -v systemd-analyze >/dev/null 2>&1; then \
	  echo "systemd-analyze present"; \
	else \
	  echo "installing Debian's systemd package (systemd-analyze) for the unit file tests (verify, security)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd; \
	fi
	@if command -v newuidmap >/dev/null 2>&1; then \
	  echo "newuidmap present"; \
	else \
	  echo "installing Debian's uidmap package (newuidmap) for the subordinate uid test (a real user namespace)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends uidmap; \
	fi

.PHONY: otelcol
otelcol: $(OTELCOL) ## build the test Collector (otlp receiver, file exporter) with the OpenTelemetry builder, once

# GOFLAGS=-e: the builder's `go mod tidy` also resolves the test imports of
# the file exporter, one of which the module proxy does not serve; -e lets
# tidy skip it (it is never built into the binary). The other flags of the
# environment are kept.
$(OTELCOL): tools/otelcol/manifest.yaml
	@mkdir -p $(dir $(OTELCOL))
	GOFLAGS="$$($(GO) env GOFLAGS) -e" $(GO) run $(OTELCOL_BUILDER) --config=tools/otelcol/manifest.yaml
	@test -x $(OTELCOL)

.PHONY: test
test: deps vet dashboards-check mutate-hand-check ## go vet, promtool rule tests, the race-enabled suite (golden, end-to-end, real Prometheus), every benchmark once
	OTELCOL_BIN=$(CURDIR)/$(OTELCOL) $(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) bench-smoke

.PHONY: e2e
e2e: ## only the end-to-end tests: the real binary, socket, Prometheus server and OTLP receiver
	$(GO) test -race -count=1 -run 'TestEndToEnd|TestSIGTERM|TestPrometheus|TestWave' -v ./cmd/registrar-otel

.PHONY: e2e-telemetry
e2e-telemetry: otelcol ## the telemetry tests against the real tools: live Prometheus rules, the real Collector, build info
	OTELCOL_BIN=$(CURDIR)/$(OTELCOL) $(GO) test -race -count=1 -run 'TestLive|TestCollector|TestBuildInfo|TestJSONLog|TestWave' -v ./cmd/registrar-otel

.PHONY: dashboards-check
dashboards-check: ## promtool check/test the alert rules and validate the Grafana dashboard
	promtool check rules dashboards/alerts.yml
	cd dashboards && promtool test rules alerts_test.yml
	$(GO) test -count=1 ./dashboards

.PHONY: vet
vet: ## go vet both modules
	$(GO) vet ./...
	$(GO) vet -tags registrar_faults ./daemon/
	cd bench && $(GO) vet ./...
	cd tools/package && $(GO) vet ./...

.PHONY: bench-smoke
bench-smoke: ## run every benchmark once so none rots
	$(GO) test -run='^$$' -bench=. -benchtime=1x -short ./...
	cd bench && $(GO) test -run='^$$' -bench=. -benchtime=1x -short ./...

.PHONY: bench
bench: ## every benchmark of both modules in interleaved passes, with benchstat's peer comparisons (BENCH_PASSES, BENCH, BENCHTIME)
	GO=$(GO) bench/interleaved.sh

# make fairness: issue 39's acceptance run. BenchmarkFairness runs the
# daemon and each flooder as processes of their own (the test binary re-run)
# and reports medians over FAIRNESS_ROUNDS interleaved rounds of
# FAIRNESS_MINTS serial mints per pass; the flood against the no-op floor
# (BenchmarkFlood's paired sub-benchmarks at c=16 and c=64) follows, its
# ratios summed up by bench/floor_ratios.awk. FAIRNESS_DIR puts the daemons'
# state elsewhere (/dev/shm: no fsync in the figures); FAIRNESS_NICE runs the
# flooders at that nice level; FAIRNESS_CONFIG_EXTRA adds [registrar] keys.
FAIRNESS_ROUNDS ?= 5
FAIRNESS_MINTS  ?= 300
FAIRNESS_FLOOD_PASSES ?= 5
FAIRNESS_OUT    ?= var/fairness

.PHONY: fairness
fairness: ## the fair-dispatch acceptance run: an innocent's mints alone and during floods, with and without fair dispatch; a wave with and without it; the flood against the floor (FAIRNESS_ROUNDS, FAIRNESS_MINTS, FAIRNESS_FLOOD_PASSES)
	@mkdir -p $(FAIRNESS_OUT)
	$(GO) test -c -o $(FAIRNESS_OUT)/daemon.test ./daemon
	cd daemon && FAIRNESS_ROUNDS=$(FAIRNESS_ROUNDS) FAIRNESS_MINTS=$(FAIRNESS_MINTS) \
	  ../$(FAIRNESS_OUT)/daemon.test -test.run='^$$' -test.bench='^BenchmarkFairness$$' -test.benchtime=1x -test.timeout=2h \
	  2>&1 | tee ../$(FAIRNESS_OUT)/fairness.txt
	cd daemon && for i in $$(seq $(FAIRNESS_FLOOD_PASSES)); do \
	  ../$(FAIRNESS_OUT)/daemon.test -test.run='^$$' -test.bench='^BenchmarkFlood$$/./c=(16|64)/server=paired' -test.benchtime=40000x -test.benchmem; \
	done 2>&1 | tee ../$(FAIRNESS_OUT)/flood.txt
	awk -f bench/floor_ratios.awk $(FAIRNESS_OUT)/flood.txt

.PHONY: fuzz-smoke
fuzz-smoke: ## run each fuzz target for FUZZTIME (default 10s)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

GOLDEN_PKGS := ./audit ./config ./telemetry ./server ./cmd/registrar-otel

.PHONY: golden
golden: ## regenerate the golden fixtures (audit lines, config errors, wire payloads, /metrics names, --json outputs); review the diff
	$(GO) test -count=1 $(GOLDEN_PKGS) -run 'Golden|InvalidFixtures' -update
	@git status --short -- $(addsuffix /testdata,$(GOLDEN_PKGS))

.PHONY: lint
lint: vet ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

# make mutate: gremlins over the packages changed since BASE (default the
# merge base with main; PKGS=./coalesce,./health names packages instead),
# one package and one worker at a time. Each mutant's test run may take
# MUTATE_TIMEOUT_COEFFICIENT times the coverage run's time: on a 2-core
# machine shared with other builds 10 leaves room for a loaded moment
# without letting a mutant that loops forever stall the run. The gated
# packages must reach MUTATE_THRESHOLD % efficacy once the equivalent
# mutants of mutants-equivalent.txt are left out. Not part of make test.
BASE                       ?= $(shell git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null)
PKGS                       ?=
MUTANTS                    ?=
MUTATE_THRESHOLD           ?= 90
MUTATE_TIMEOUT_COEFFICIENT ?= 10
MUTATE_GATED               := limiter coalesce audit registrar wire server vocab internal/groupcommit health sinks/
MUTATE_SKIP                := cmd/registrar-otel

.PHONY: mutate
mutate: ## mutation testing (gremlins) of the packages changed since BASE (or PKGS=...): efficacy per package, lived mutants; >= 90 % for the gated ones
	@GO=$(GO) GREMLINS=$(GREMLINS) BASE="$(BASE)" PKGS="$(PKGS)" EXCLUDE="$(EXCLUDE)" THRESHOLD=$(MUTATE_THRESHOLD) \
	  COEFFICIENT=$(MUTATE_TIMEOUT_COEFFICIENT) EQUIVALENT=$(CURDIR)/mutants-equivalent.txt \
	  GATED="$(MUTATE_GATED)" SKIP="$(MUTATE_SKIP)" tools/mutate/mutate.sh

# make mutate-hand: the statement-level mutants gremlins does not make
# (tools/mutate/hand-mutants.txt), each applied to a scratch copy of the
# tree; every one must turn its named tests red. MUTANTS=W1,X2 picks some.
.PHONY: mutate-hand
mutate-hand: ## the hand-made mutants of tools/mutate/hand-mutants.txt: each must turn its named tests red (MUTANTS=W1,X2 picks some)
	@GO=$(GO) MUTANTS="$(MUTANTS)" tools/mutate/hand.sh

.PHONY: mutate-hand-check
mutate-hand-check: ## check that every hand-made mutant still applies to the code (no test run; part of make test)
	@HAND_CHECK=apply tools/mutate/hand.sh

.PHONY: docs-deps
docs-deps: ## install mkdocs and mkdocs-material when missing (Debian's packages; needs root)
	@if command -v mkdocs >/dev/null 2>&1 && { dpkg-query -W -f='$${Status}' mkdocs-material 2>/dev/null | grep -q 'ok installed' || \
	     "$$(sed -n '1s/^#! *//p' "$$(command -v mkdocs)")" -c 'import material' 2>/dev/null; }; then \
	  echo "mkdocs and mkdocs-material present"; \
	else \
	  echo "installing Debian's mkdocs and mkdocs-material for the docs site"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mkdocs mkdocs-material; \
	fi

.PHONY: docs
docs: docs-deps ## build the docs site into site/ (English at the root, Korean under ko/) with mkdocs build --strict
	rm -rf site
	mkdocs build --strict --config-file mkdocs.yml
	mkdocs build --strict --config-file mkdocs.ko.yml

# The package's binary: PIE, full RELRO, stripped (lintian's hardening and
# stripping checks); see packaging/nfpm.yaml.
PKG_BIN     := bin/registrar-otel-pkg
PKG_LDFLAGS := $(LDFLAGS) -s -w -linkmode=external -extldflags '-Wl,-z,relro,-z,now'
PKG_VERSION ?= $(VERSION)
ARCH        ?= $(shell $(GO) env GOARCH)

.PHONY: package
package: ## the Debian package, the release tarball and SHA256SUMS into dist/ (nfpm, tools/package)
	$(GO) build -buildmode=pie -trimpath -ldflags "$(PKG_LDFLAGS)" -o $(PKG_BIN) ./cmd/registrar-otel
	cd tools/package && $(GO) run . -root ../.. -bin $(PKG_BIN) -version $(PKG_VERSION) -arch $(ARCH) -out dist
	cd dist && sha256sum -c SHA256SUMS

.PHONY: package-lint
package-lint: package ## lintian on the package: no error allowed (installs Debian's lintian when missing; needs root)
	@command -v lintian >/dev/null 2>&1 || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lintian; }
	lintian --fail-on error dist/registrar-otel_$(PKG_VERSION)_$(ARCH).deb

.PHONY: package-check
package-check: package-lint ## as root on a Debian host: install, run, remove, purge and upgrade the package (packaging/test/acceptance.sh)
	packaging/test/acceptance.sh dist/registrar-otel_$(PKG_VERSION)_$(ARCH).deb

.PHONY: systemd-check
systemd-check: package ## as root: the package under a real systemd (Debian bookworm's, booted in systemd-nspawn), each unit claim a named step (packaging/test/systemd-check.sh; the container's root file system is cached in var/systemd-check)
	packaging/test/systemd-check.sh dist/registrar-otel_$(PKG_VERSION)_$(ARCH).deb

# Where the alert rules' runbook_url and the dashboard's link lead: the
# installed docs by default; `make rules RUNBOOK_BASE=https://docs.example.org/registrar-otel`
# rewrites them to your copy of the docs site (make docs).
INSTALLED_DOCS := file:///usr/share/doc/registrar-otel/en/metrics.md
RUNBOOK_BASE   ?=

.PHONY: rules
rules: ## the alert rules and the dashboard with runbook links to RUNBOOK_BASE (your docs site) into dist/
	@test -n "$(RUNBOOK_BASE)" || { echo "set RUNBOOK_BASE to the base URL of your docs site (make docs), e.g. RUNBOOK_BASE=https://docs.example.org/registrar-otel"; exit 2; }
	@mkdir -p dist
	sed 's|$(INSTALLED_DOCS)|$(RUNBOOK_BASE)/metrics/|g' dashboards/alerts.yml >dist/alerts.yml
	sed 's|$(INSTALLED_DOCS)|$(RUNBOOK_BASE)/metrics/|g' dashboards/registrar-limiter.json >dist/registrar-limiter.json
	promtool check rules dist/alerts.yml

.PHONY: clean
clean: ## remove build output (never var/)
	rm -rf bin site dist

VAULT_BIN := var/tools/vault/bin/vault

.PHONY: vault
vault: ## build the small Vault test server the openbao integration tests run (tools/vault/main.go -> var/tools/vault/bin/vault; under 5 min cold on 2 idle cores, skipped when present)
	tools/vault/build.sh

.PHONY: ha-check
# HA_IDS: the registrations of the first mints and of the races (empty: 40
# each, as CI runs it; 200 is the issue's full size, 1200 concurrent first mints).
HA_IDS ?=
ha-check: vault ## the HA acceptance run: a 3-node raft cluster (retry_join) on loopback, two registrars, races and 10 leader SIGKILLs; prints each check PASS/FAIL (docs/en/ha.md#ha-check; about 3 min; HA_IDS=200 for the full size)
	REGISTRAR_HA_CHECK=1 REGISTRAR_HA_CHECK_IDS=$(HA_IDS) REGISTRAR_TEST_REQUIRE_VAULT=1 $(GO) test -run '^TestHACheck$$' -count=1 -timeout 20m -v ./daemon

.PHONY: vault-full
vault-full: ## build the full HashiCorp Vault v1.21.4 binary instead (var/tools/vault/bin/vault-full, 365 MB; ~22 min cold); run the tests on it with REGISTRAR_TEST_VAULT_BIN
	tools/vault/build.sh full
