# muster: run `make help` for the targets.
GO        ?= go
BIN       ?= bin/muster
# Every target builds with the same flags, so SQLite (cgo) is compiled once.
RACE      ?= -race
PKGS      := ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/musterhq/muster/shared/version.Version=$(VERSION)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/muster
	$(GO) build $(RACE) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/muster

.PHONY: dev
dev: build ## Start a core and three agents on loopback (temporary SQLite files)
	$(BIN) dev --agents 3

.PHONY: dev-ha
dev-ha: build ## Start PostgreSQL, three core replicas and three agents on loopback
	$(BIN) dev --ha --replicas 3 --agents 3

.PHONY: test
test: lint ## Run every test (unit, fuzz seeds, e2e) with the race detector
	$(GO) test $(RACE) -count=1 -timeout 15m $(PKGS)

.PHONY: lint
lint: ## gofmt check and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: generate
generate: ## Regenerate mocks (go.uber.org/mock) and fail if they drifted
	$(GO) generate $(PKGS)
	@git diff --exit-code -- ':(glob)**/*mock*.go' || (echo "generated mocks drifted: commit them"; exit 1)

.PHONY: bench
bench: ## Run the benchmarks (no race detector): a table, and bench/results.json
	$(GO) run ./e2e/benchreport -out bench/results.json

# The chaos test for long: CHAOS_SEED empty picks a random seed (printed).
CHAOS_SEED     ?=
CHAOS_DURATION ?= 10m
# CHAOS_REPLICAS=3 runs three core replicas on PostgreSQL instead of one core on SQLite.
CHAOS_REPLICAS ?=
CHAOS_TIMEOUT  ?= 60m

.PHONY: chaos
chaos: ## Run the chaos test for long: make chaos CHAOS_SEED=… CHAOS_DURATION=10m
	CHAOS_SEED='$(CHAOS_SEED)' CHAOS_DURATION='$(CHAOS_DURATION)' CHAOS_REPLICAS='$(CHAOS_REPLICAS)' \
	  $(GO) test $(RACE) -count=1 -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) -v ./e2e/

.PHONY: clean
clean: ## Remove build output
	rm -rf bin bench/results.json
