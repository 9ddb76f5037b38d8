# cruxprov — see README.md. `make demo` runs the main job; `make test` the tests.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
PKG := github.com/cruxible/cruxprov
LDFLAGS := -buildid= -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT)
# CGO off: both binaries are static; -trimpath, an empty build id and no VCS stamp keep them
# reproducible (§14): Go otherwise stamps the revision, its time and vcs.modified when the
# environment's GOFLAGS allow it, so the same commit gave other bytes on another runner.
# urfave_cli_no_docs leaves out urfave/cli's man/markdown generators (unused): their package
# init (regexps, a markdown engine) was ~3 ms of every command's start.
BUILD := CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags urfave_cli_no_docs -ldflags '$(LDFLAGS)'
CONFORMANCE_DIR ?= $(CURDIR)/../shared/conformance
FUZZTIME ?= 10s
CMDS := $(notdir $(wildcard cmd/*))
BIN := bin

.PHONY: FORCE all build test gotest pytest bench fuzz conformance demo fixtures lint clean interop schemas

all: build

build:
	@mkdir -p bin
	@for c in $(CMDS); do echo "build bin/$$c"; $(BUILD) -o bin/$$c ./cmd/$$c || exit 1; done

# cruxshim for another architecture's images (ci.md, "several architectures"): make bin/cruxshim-arm64.
# The same build command as make build's, so its bytes are the ones any runner gets for that
# architecture (an image's digest depends on them); FORCE: go's cache decides what to rebuild.
$(BIN)/cruxshim-%: FORCE
	@mkdir -p $(BIN)
	@echo "build $@"; GOOS=linux GOARCH=$* $(BUILD) -o $@ ./cmd/cruxshim

test: gotest pytest

gotest:
	$(GO) test -race -count=1 -timeout 20m ./...

pytest:
	@if [ -d python/tests ]; then \
	  log=$$(mktemp "$${TMPDIR:-/tmp}/cruxprov-pytest.XXXXXX"); \
	  PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s python/tests -t python >"$$log" 2>&1; rc=$$?; \
	  tail -n 3 "$$log"; [ $$rc -eq 0 ] || cat "$$log"; rm -f "$$log"; exit $$rc; fi

bench: build
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout 60m ./...
	@for s in bench/*.sh; do [ -f "$$s" ] || continue; echo "== $$s"; bash "$$s" || exit 1; done

# Every Fuzz target in every package, each for $(FUZZTIME). Go 1.26's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" as -fuzztime ends (go.dev/issue/75804, fixed in
# Go 1.27): a run that failed so without writing a failing input is run once more.
fuzz:
	@set -e; log=$$(mktemp "$${TMPDIR:-/tmp}/cruxprov-fuzz.XXXXXX"); trap 'rm -f "$$log"' EXIT; \
	for p in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz' || true); do \
	    echo "fuzz $$p $$f"; \
	    for try in 1 2; do \
	      if $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s $$p >"$$log" 2>&1; then break; fi; \
	      if [ $$try = 1 ] && grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
	        echo "  the fuzztime deadline race (go.dev/issue/75804), no failing input: once more"; continue; fi; \
	      cat "$$log"; exit 1; \
	    done; \
	  done; done

# Vectors from peers' test suites (../shared/conformance); the project's own tests do not need them.
conformance:
	@test -d "$(CONFORMANCE_DIR)" || { echo "no conformance data at $(CONFORMANCE_DIR)"; exit 1; }
	CRUXPROV_CONFORMANCE_DIR="$(CONFORMANCE_DIR)" $(GO) test -count=1 -run 'Conformance' ./...

fixtures: build
	@if [ -d internal/fixtures/cmd ]; then $(GO) run ./internal/fixtures/cmd -out build/fixtures; fi

demo: build
	@bash scripts/demo.sh

# cosign interop (not part of make test): a signed image pushed to a local docker-registry,
# verified by cosign v2 offline (scripts/interop.sh says what it needs).
interop: build
	@bash scripts/interop.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...
	@# What an executor imports besides the Linux-only seal (its doc says why) builds for macOS too.
	GOOS=darwin GOARCH=arm64 $(GO) build ./refusal ./digest ./canonical ./treehash ./registry/... ./sign ./receipts ./invoke ./shim
	@# cruxshim is the ENTRYPOINT of arm64 images too (docs/images.md, another architecture).
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./cmd/cruxshim

clean:
	rm -rf bin build

# What internal/schematest validates with: the in-toto validator's modules (the CycloneDX JSON
# schemas come with github.com/CycloneDX/cyclonedx-go, pinned by its go.sum) into the module cache.
# Its tests skip without them (and without python3-jsonschema, .ci/apt-packages); CI runs them.
schemas:
	cd internal/schematest/intoto && $(GO) mod download
