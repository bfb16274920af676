# agent-runner — `make setup`, `make demo`, `make test` (README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

SOURCES := $(shell find src -type f) tsconfig.json package.json scripts/copy-assets.mjs scripts/build-helper.sh
# Where `runner` is linked: /usr/local/bin for root, ~/.local/bin otherwise.
BIN_DIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)

.PHONY: help setup docker deps build helper image link demo demo-agency typecheck check format test test-deps test-unit test-integration bench clean

help:
	@echo "make setup   Docker engine (if absent), npm deps, Go (if absent), build (with the sandbox helper), sandbox image, 'runner' on PATH"
	@echo "make demo    run examples/fix-median with the scripted model and print the verified diff"
	@echo "make demo-agency  run examples/agency/fix-pipeline (four agents, scripted) and print the timeline and merged diff"
	@echo "make check   typecheck, folder import cycles, dead exports, eslint, prettier (npm run check)"
	@echo "make test    make check, then all tests: unit, end-to-end and integration (real Docker)"
	@echo "make test-unit  the unit project only: no Docker daemon needed, seconds"
	@echo "make bench   sandbox, loop and network benchmarks (medians, ratios; see bench/README.md)"

setup: docker deps build image link
	@echo "setup done: try 'make demo', or 'runner exec path/to/task.yaml'"

docker:
	@bash scripts/ensure-docker.sh

deps: node_modules/.installed
node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

build: dist/.built
dist/.built: $(SOURCES) node_modules/.installed
	npm run build
	@touch $@

# The static in-container helper (docs/sandbox-helper.md); npm run build builds it too.
helper:
	@bash scripts/build-helper.sh

image: docker
	@bash sandbox-images/build.sh

link: build
	@mkdir -p $(BIN_DIR)
	@ln -sf $(CURDIR)/dist/cli/main.js $(BIN_DIR)/runner
	@command -v runner >/dev/null 2>&1 && echo "runner -> $(BIN_DIR)/runner" || echo "runner linked in $(BIN_DIR); add it to PATH"

demo: build
	@bash scripts/demo.sh

demo-agency: build
	@bash scripts/demo-agency.sh

typecheck: deps
	npm run typecheck

check: deps
	npm run check

format: deps
	npm run format

test: build check test-deps
	npx vitest run

# busybox-static for the any-image tests (scripts/ensure-test-deps.sh).
test-deps:
	@bash scripts/ensure-test-deps.sh

# The vitest projects (vitest.config.ts): `unit` needs no Docker daemon, `docker` and `docker-no-node` do.
test-unit: build
	npx vitest run --project unit

test-integration: build test-deps
	npx vitest run --project docker --project docker-no-node

bench: deps build
	npx tsx bench/sandbox.bench.ts
	npx tsx bench/network.bench.ts
	npx tsx bench/long-run.bench.ts
	npx tsx bench/subagents.bench.ts

clean:
	rm -rf dist build node_modules/.installed
