# khook — one engine, two plugins (kubectl khook, helm khook).
# Everything a newcomer needs: `make demo` and `make test` (see README.md).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

ROOT      := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CACHE     := $(ROOT)/.cache
BIN       := $(ROOT)/bin
GO        ?= go

VERSION   ?= $(shell git -C $(ROOT) describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT    ?= $(shell git -C $(ROOT) rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DATE      ?= $(shell git -C $(ROOT) log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS   := -s -w -X khook.io/core/version.Version=$(VERSION) -X khook.io/core/version.Commit=$(COMMIT) -X khook.io/core/version.Date=$(DATE)
# The JUnit reports are checked against Jenkins' JUnit schema with libxml2
# through cgo (core/testing/junitxsd, build tag libxml2): `make test-deps`
# installs what it needs; a build with the tag that cannot validate fails
# the check. `make test TESTTAGS=` leaves it out (the checks then skip).
TESTTAGS  ?= libxml2
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
# Every module of go.work: the engine (core), the three entrypoints and the
# project's tooling (dev: release packaging, the image, the end-to-end and
# provider acceptance tests, the test cluster's and bench's commands).
MODULES   := ./core/... ./kubectl-khook/... ./helm-khook/... ./terraform-provider-khook/... ./dev/...

.PHONY: build
build: ## build both plugins into bin/
	@mkdir -p $(BIN)
	cd kubectl-khook && $(GOBUILD) -o $(BIN)/kubectl-khook .
	cd helm-khook && $(GOBUILD) -o $(BIN)/helm-khook .
	cd terraform-provider-khook && $(GOBUILD) -o $(BIN)/terraform-provider-khook .

.PHONY: demo
demo: build cluster-up ## build both plugins, start the local test control plane (built the first time) and apply the quickstart to it
	@echo
	@echo "==> kubectl khook apply -f examples/quickstart.yaml"
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig $(BIN)/kubectl-khook apply -f examples/quickstart.yaml
	@echo
	@echo "Look around:   export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig PATH=$(BIN):\$$PATH"
	@echo "               kubectl get all -n khook-demo; kubectl khook plan -f examples/quickstart.yaml"
	@echo "Undo it:       kubectl khook destroy -f examples/quickstart.yaml   (shows the plan and asks; --yes does not)"
	@echo "Stop it:       make cluster-down"

# What the tests need beyond Go: libxml2's development files, pkg-config and
# a C compiler for the schema check, and headless Chromium, in which the
# timeline picture's test opens it (core/render: it is a test failure
# without it under make, KHOOK_TEST_BROWSER). Installed with apt-get when
# missing and make runs as root (CI: a fresh Debian machine); otherwise make
# names them.
TESTDEPS_CHECK := pkg-config --exists libxml-2.0 2>/dev/null && command -v "$$($(GO) env CC)" >/dev/null
.PHONY: test-deps
test-deps: ## install the tests' system packages when missing (Debian, as root: libxml2-dev pkg-config gcc, chromium)
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "==> apt-get install chromium (the timeline picture's browser test: core/render)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
		else \
			echo "make test needs headless Chromium for the timeline picture's test: sudo apt-get install chromium" >&2; \
			exit 1; \
		fi; \
		command -v chromium >/dev/null || { echo "test-deps: chromium still missing after apt-get install chromium" >&2; exit 1; }; \
	fi
ifneq ($(filter libxml2,$(TESTTAGS)),)
	@if ! { $(TESTDEPS_CHECK); }; then \
		pkgs="libxml2-dev pkg-config gcc libc6-dev"; \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "==> apt-get install $$pkgs (the JUnit schema check: core/testing/junitxsd)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null; \
		else \
			echo "make test needs libxml2's development files, pkg-config and a C compiler: sudo apt-get install $$pkgs (or make test TESTTAGS= to skip the JUnit schema checks)" >&2; \
			exit 1; \
		fi; \
		$(TESTDEPS_CHECK) || { echo "test-deps: still missing after apt-get install $$pkgs" >&2; exit 1; }; \
	fi
endif

.PHONY: vet
vet: test-deps ## go vet every module
	$(GO) vet -tags '$(TESTTAGS)' $(MODULES)

.PHONY: test-unit
test-unit: vet build ## unit tests only: fast, offline, no cluster (the CLI end-to-end tests use bin/)
	KHOOK_BIN=$(BIN) KHOOK_TEST_BROWSER=1 $(GO) test -race -count=1 -tags '$(TESTTAGS)' $(MODULES)

.PHONY: test
# testbin first: the unit tests run kubectl too (kubectl_complete-khook).
test: testbin test-unit test-dist-host test-integration ## everything: unit tests, this platform's release archives, then integration tests against the local test cluster

-include hack/cluster.mk
-include hack/dist.mk
-include hack/image.mk
-include hack/tofu.mk

# The integration tests also run the built plugins (the CLI end-to-end
# tests, helm khook through helm 3 and helm 4) and the helm CLIs, built
# before the cluster starts. The six-platform release and its krew manifest
# are `make test-dist` (about 18 minutes of cross-compiling on 2 cores when
# cold: docs/plugins.md).
test-integration: test-deps build helm-tools tofu otlpsink
test-integration: export KHOOK_OTLPSINK := $(OTLPSINK)

# The OTLP receiver the trace tests send to: the OpenTelemetry Collector's
# own receiver in a small program (hack/otlpsink, a tools module outside
# go.work, like the test cluster's), handed to go build every time (its
# cache makes a no-op rebuild about a second; cold, about 2 minutes).
OTLPSINK := $(CACHE)/otlpsink/otlpsink
.PHONY: otlpsink
otlpsink: ## build the OTLP receiver of the trace tests (hack/otlpsink) into .cache/otlpsink
	@mkdir -p $(dir $(OTLPSINK))
	cd hack/otlpsink && GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly $(GO) build -trimpath -o $(OTLPSINK) .

.PHONY: help
help:
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
