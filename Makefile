# muster: run `make help` for the targets.
GO        ?= go
BIN       ?= bin/muster
# The agent-only binary the nodes install (docs/architecture.md, "Binaries").
AGENT_BIN ?= bin/muster-agent
# The tests and vet run under the race detector with the same flags, so SQLite
# (cgo, about a minute to compile) is compiled once for both. `make build`
# makes the binary people deploy, without the race detector: one more compile
# of SQLite the first time, cached afterwards.
RACE      ?= -race
# ./e2e first: go test starts the packages in the order named, and the
# end-to-end package is the longest, so it starts while the others run.
PKGS      := ./e2e ./...
# Expanded once: `make package` names the binaries `make release` built
# with it, and the tree may change in between.
ifndef VERSION
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
LDFLAGS   := -X github.com/musterhq/muster/shared/version.Version=$(VERSION)
DIST      ?= dist
# C compilers for `make release` (SQLite is cgo): Debian's gcc package gives
# x86_64-linux-gnu-gcc, gcc-aarch64-linux-gnu gives the arm64 one.
CC_amd64  ?= x86_64-linux-gnu-gcc
CC_arm64  ?= aarch64-linux-gnu-gcc
# staticcheck at a pinned version, fetched through the module proxy by
# `go run` (nothing to install; cached after the first run).
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/muster and bin/muster-agent, the deployable binaries (no race detector)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/muster
	$(GO) build -ldflags '$(LDFLAGS)' -o $(AGENT_BIN) ./cmd/muster-agent

# dev runs the deployable build: on a fresh clone it is the quickest to make
# (60 s against 240 s with -race, measured on 2 busy cores) and what people
# run; after `make test` it costs one more compile of SQLite.
.PHONY: dev
dev: build ## Start a core and three agents on loopback (temporary SQLite files)
	$(BIN) dev --agents 3

# The released binaries are position-independent (-buildmode=pie), as
# Debian builds its programs (lintian's hardening-no-pie), stripped
# (-s -w) and with no build paths (-trimpath).
.PHONY: release
release: ## Build dist/muster{,-agent}-VERSION-linux-{amd64,arm64} and dist/SHA256SUMS
	@command -v $(CC_arm64) >/dev/null || { \
	  echo "make release needs $(CC_arm64), the arm64 cross compiler: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross (or set CC_arm64)"; exit 1; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	for arch in amd64 arm64; do \
	  cc=$(CC_amd64); [ $$arch = arm64 ] && cc=$(CC_arm64); \
	  for cmd in muster muster-agent; do \
	    CGO_ENABLED=1 GOOS=linux GOARCH=$$arch CC=$$cc \
	      $(GO) build -trimpath -buildmode=pie -ldflags '-s -w $(LDFLAGS)' \
	      -o $(DIST)/$$cmd-$(VERSION)-linux-$$arch ./cmd/$$cmd || exit 1; \
	  done; \
	done
	cd $(DIST) && sha256sum muster-$(VERSION)-linux-* muster-agent-$(VERSION)-linux-* > SHA256SUMS && cat SHA256SUMS
# package makes, for each architecture, the .deb and .rpm of the muster
# package (the one binary, the core's unit) and of the muster-agent package
# (the agent's binary and unit) from the binaries `make release` built, with
# nfpm driven by ./packaging (the files, the muster user, the scripts, the
# dependencies read from the binaries, the man pages and completion scripts
# of a gendocs build for this machine: see docs/operations.md, "Packages"),
# and lists every file in SHA256SUMS.
.PHONY: package
package: release ## Build dist/*.deb and dist/*.rpm for amd64 and arm64 (nfpm)
	for arch in amd64 arm64; do \
	  $(GO) run ./packaging -binary $(DIST)/muster-$(VERSION)-linux-$$arch \
	    -agent-binary $(DIST)/muster-agent-$(VERSION)-linux-$$arch -arch $$arch \
	    -version $(VERSION) -formats deb,rpm -out $(DIST) || exit 1; \
	done
	cd $(DIST) && sha256sum muster* > SHA256SUMS && cat SHA256SUMS

# repo builds, from the packages in $(DIST), a signed apt repository
# (reprepro) and a yum repository (createrepo_c) in $(REPO), with the public
# key beside them for apt's signed-by (packaging/repo.sh; docs/production.md
# adds it to a machine). It signs with REPO_KEY (a fingerprint) from
# REPO_GNUPGHOME; without REPO_KEY, with a throwaway test key made in
# $(DIST)/repo-key (packaging/repo-key.sh, never committed). It installs
# nothing: a missing tool is named, and it stops.
REPO           ?= $(DIST)/repo
REPO_GNUPGHOME ?= $(DIST)/repo-key
REPO_KEY       ?=
.PHONY: repo
repo: ## Build dist/repo: signed apt and yum repositories of dist/*.deb, *.rpm (reprepro, createrepo-c, gpg)
	@key='$(REPO_KEY)'; \
	  if [ -z "$$key" ]; then key=$$(sh packaging/repo-key.sh '$(REPO_GNUPGHOME)') || exit 1; fi; \
	  sh packaging/repo.sh '$(DIST)' '$(REPO)' '$(REPO_GNUPGHOME)' "$$key"

# image builds the core's container image, an OCI layout in $(DIST)/image,
# without a Docker daemon (./packaging/image, google/go-containerregistry):
# muster linked statically (the image holds no C library) for amd64, and
# for arm64 when its cross compiler is there, run as an unprivileged user.
# `skopeo copy oci:dist/image:VERSION docker://...` or `podman load` takes it.
STATIC_TAGS  := osusergo netgo sqlite_omit_load_extension
STATIC_FLAGS := -s -w -linkmode external -extldflags "-static" $(LDFLAGS)
.PHONY: image
image: ## Build dist/image, the core's OCI image (static muster, no Docker daemon)
	mkdir -p $(DIST)
	bins=""; for arch in amd64 arm64; do \
	  cc=$(CC_amd64); [ $$arch = arm64 ] && cc=$(CC_arm64); \
	  command -v $$cc >/dev/null || { [ $$arch = amd64 ] && cc=gcc || { echo "image: no $$cc, no $$arch image"; continue; }; }; \
	  CGO_ENABLED=1 GOOS=linux GOARCH=$$arch CC=$$cc $(GO) build -trimpath -tags '$(STATIC_TAGS)' \
	    -ldflags '$(STATIC_FLAGS)' -o $(DIST)/muster-static-$(VERSION)-linux-$$arch ./cmd/muster || exit 1; \
	  bins="$$bins -binary $$arch=$(DIST)/muster-static-$(VERSION)-linux-$$arch"; \
	done; \
	$(GO) run ./packaging/image $$bins -version $(VERSION) -out $(DIST)/image

.PHONY: dev-ha
dev-ha: build ## Start PostgreSQL, three core replicas and three agents on loopback
	$(BIN) dev --ha --replicas 3 --agents 3

.PHONY: test
# The timeout is per package: the end-to-end package, the longest, takes
# about 12 minutes on 2 cores, and a cold build cache adds its binaries'.
test: lint test-deps ## Run every test (unit, fuzz seeds, e2e, PostgreSQL, browser) with the race detector
	$(GO) test $(RACE) -count=1 -timeout 25m $(PKGS)

# What the tests need beside Go and a C compiler, from Debian's packages:
# systemd-analyze (the units in configs/systemd), PostgreSQL (the store's
# tests start a throwaway server), Chromium (the web UI's browser tests) and
# promtool (the prometheus package: the alert rules of configs/monitoring),
# the package repository's tools (reprepro, createrepo-c, gpg; rpm to
# install the .rpm into a temporary root), and lintian (the .debs' checks).
# As root with apt-get they are installed when missing; otherwise the target
# says what to install and stops.
.PHONY: test-deps
test-deps: ## Install what the tests need (systemd, postgresql, chromium, prometheus, reprepro, createrepo-c, gpg, rpm, lintian) when missing
	@missing=""; \
	  command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	  command -v dbus-daemon >/dev/null || missing="$$missing dbus"; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v promtool >/dev/null || missing="$$missing prometheus"; \
	  command -v reprepro >/dev/null || missing="$$missing reprepro"; \
	  command -v createrepo_c >/dev/null || missing="$$missing createrepo-c"; \
	  command -v gpg >/dev/null || missing="$$missing gpg"; \
	  command -v rpm >/dev/null || missing="$$missing rpm"; \
	  command -v lintian >/dev/null || missing="$$missing lintian"; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      echo "installing:$$missing"; \
	      DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	    else \
	      echo "make test needs:$$missing (for example: sudo apt-get install$$missing)"; exit 1; \
	    fi; \
	  fi

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, go.mod tidy, and the client build for macOS without cgo
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(RACE) $(PKGS)
	$(STATICCHECK) $(PKGS)
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 $(GO) vet $(PKGS)

.PHONY: generate
generate: ## Regenerate mocks (go.uber.org/mock) and fail if they drifted
	$(GO) generate $(PKGS)
	@git diff --exit-code -- ':(glob)**/*mock*.go' || (echo "generated mocks drifted: commit them"; exit 1)

.PHONY: bench
bench: ## Run the benchmarks (no race detector): a table, and bench/results.json
	$(GO) run ./e2e/benchreport -out bench/results.json

.PHONY: docs
docs: ## Rewrite the tables of docs/performance.md from bench/results.json, the import rows of docs/architecture.md from go list, and its rows of core/orchestrate's files from their calls
	$(GO) run ./e2e/benchreport -docs docs/performance.md -results bench/results.json
	$(GO) test -count=1 -run 'TestArchitectureImportRowsAreWhatGoListSays|TestOrchestrateFilesCallOnlyIntoLowerRows' ./e2e/doccheck -update

# The chaos test. `make test` runs it with a fixed seed (the same choices
# every time) twice: one core on SQLite for 50 s (TestChaos) and three core
# replicas on PostgreSQL for 60 s (TestChaosReplicas: replicas killed and
# frozen, PostgreSQL restarted). These run it with a random seed (printed,
# with the command that replays it): CHAOS_SEED=N replays a seed.
CHAOS_SEED     ?= random
CHAOS_DURATION ?= 10m
# CHAOS_REPLICAS=3 runs three core replicas on PostgreSQL instead of one core on SQLite.
CHAOS_REPLICAS ?=
CHAOS_TIMEOUT  ?= 60m

.PHONY: chaos
chaos: ## Run the chaos test for long with a random seed: make chaos CHAOS_SEED=… CHAOS_DURATION=10m
	CHAOS_SEED='$(CHAOS_SEED)' CHAOS_DURATION='$(CHAOS_DURATION)' CHAOS_REPLICAS='$(CHAOS_REPLICAS)' \
	  $(GO) test $(RACE) -count=1 -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) -v ./e2e/

.PHONY: chaos-nightly
chaos-nightly: ## The nightly chaos run: a random seed for 30 minutes, log in chaos-nightly.log
	CHAOS_SEED=random CHAOS_DURATION=30m $(GO) test $(RACE) -count=1 -run '^TestChaos$$' \
	  -timeout 90m -v ./e2e/ > chaos-nightly.log 2>&1; rc=$$?; grep 'chaos:' chaos-nightly.log; exit $$rc

.PHONY: clean
clean: ## Remove build output
	rm -rf bin $(DIST) chaos-nightly.log
