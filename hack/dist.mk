# Release packaging: the eighteen archives (kubectl-khook, helm-khook and
# terraform-provider-khook on six platforms), checksums.txt, the provider's
# registry files (SHA256SUMS, manifest.json) and the krew manifest; the helm
# CLIs the plugin tests run. See docs/plugins.md and docs/terraform.md.
# Included by the top-level Makefile, which defines ROOT, CACHE, GO, VERSION,
# COMMIT, DATE and LDFLAGS.

DIST           ?= $(ROOT)/dist
DIST_PLATFORMS := linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64 windows_arm64
# Where releases are published: <RELEASE_URL>/<version>/<archive>. The krew
# manifest's URIs and the helm plugin's install hook (scripts/install-plugin.*,
# same default, KHOOK_RELEASE_URL overrides it) download from here.
RELEASE_URL    ?= https://github.com/khook-io/khook/releases/download

# The version scheme. plugin.yaml's `version:` is the release line (semver,
# no v): the helm install hook downloads that release. A build of the commit
# tagged v<that version> is the release itself; any other build is
# v<that version>-dev. `make dist DIST_VERSION=v1.2.3` overrides it.
# (VERSION runs git each time it is expanded: expand it once.)
PLUGIN_VERSION := $(shell sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$$/\1/p' $(ROOT)/plugin.yaml)
ifeq ($(origin DIST_VERSION),undefined)
DIST_GIT_VERSION := $(VERSION)
DIST_VERSION   := $(if $(filter v$(PLUGIN_VERSION),$(DIST_GIT_VERSION)),$(DIST_GIT_VERSION),v$(PLUGIN_VERSION)-dev)
endif

# The Makefile's LDFLAGS (-s -w, version, commit, date) as they are, then an
# empty build ID and the release version (the linker keeps the last -X of a
# name): same sources, same bytes. DIST_DATE (the commit date) is every
# archive member's mtime.
DIST_DATE      := $(DATE)
DIST_LDFLAGS   := $(LDFLAGS) -buildid= -X khook.io/core/version.Version=$(DIST_VERSION)
# The same compile flags as `make build` (CGO_ENABLED=0, -trimpath), so the
# host platform's packages come from its build cache. -buildvcs=false: the
# version comes from the ldflags, not from the state of the work tree.
DIST_GOBUILD    = CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) \
	$(GO) build -trimpath -buildvcs=false -ldflags '$(DIST_LDFLAGS)'

TOOLS_DIR      := $(CACHE)/tools
DISTTOOL       := $(TOOLS_DIR)/khook-dist

.PHONY: dist
dist: dist-tool $(addprefix dist-bin-,$(DIST_PLATFORMS)) ## release archives of both plugins and the Terraform provider for six platforms, dist/checksums.txt and the provider's SHA256SUMS and manifest.json
	@rm -f $(DIST)/*.tar.gz $(DIST)/*.zip $(DIST)/checksums.txt $(DIST)/*_SHA256SUMS $(DIST)/*_manifest.json
	$(DISTTOOL) package -root $(ROOT) -bin $(DIST)/bin -out $(DIST) -version $(DIST_VERSION) -date $(DIST_DATE) -platforms '$(DIST_PLATFORMS)'

# The three binaries of one platform in one go build: one package graph, both
# cores busy. Always handed to go build: its cache makes a no-op cheap.
dist-bin-%:
	@mkdir -p $(DIST)/bin/$*
	cd $(ROOT) && $(DIST_GOBUILD) -o $(DIST)/bin/$*/ ./kubectl-khook ./helm-khook ./terraform-provider-khook

.PHONY: dist-tool
dist-tool:
	@mkdir -p $(TOOLS_DIR)
	@cd $(ROOT) && CGO_ENABLED=0 $(GO) build -trimpath -o $(DISTTOOL) ./dev/cmd/khook-dist

.PHONY: krew
krew: dist ## render the krew manifest from the archives (real sha256s) into dist/krew/khook.yaml
	$(DISTTOOL) krew -root $(ROOT) -dist $(DIST) -version $(DIST_VERSION) -release-url $(RELEASE_URL) -o $(DIST)/krew/khook.yaml

.PHONY: krew-update
krew-update: krew ## at a release: copy dist/krew/khook.yaml over the committed krew/khook.yaml
	cp $(DIST)/krew/khook.yaml $(ROOT)/krew/khook.yaml

.PHONY: krew-check
krew-check: dist-tool ## check krew/khook.yaml: valid for krew, and exactly what the template renders (no hand edits)
	$(DISTTOOL) krew-check -root $(ROOT)

PROVIDER_SUMS   = terraform-provider-khook_$(DIST_VERSION:v%=%)_SHA256SUMS
.PHONY: dist-repro
dist-repro: dist ## build the release a second time into .cache/dist-repro and compare checksums (reproducibility)
	$(MAKE) --no-print-directory dist DIST=$(CACHE)/dist-repro
	diff $(DIST)/checksums.txt $(CACHE)/dist-repro/checksums.txt
	diff $(DIST)/$(PROVIDER_SUMS) $(CACHE)/dist-repro/$(PROVIDER_SUMS)
	@echo "reproducible: the two builds' eighteen archives are identical"

# The release path of `make test`: `make dist` for this machine's platform
# only (its three archives, checksums.txt and the provider's registry files,
# in .cache/dist-host), checked as test-dist checks all six, its binaries
# unpacked and run. The binaries' packages come from make build's cache:
# mostly three links.
HOST_PLATFORM  := $(shell $(GO) env GOOS)_$(shell $(GO) env GOARCH)
DIST_HOST      := $(CACHE)/dist-host
.PHONY: test-dist-host
test-dist-host: ## release archives of this machine's platform only: built as make dist does, checked, unpacked and run (part of make test)
	@$(MAKE) --no-print-directory dist DIST=$(DIST_HOST) DIST_PLATFORMS=$(HOST_PLATFORM)
	KHOOK_DIST=$(DIST_HOST) KHOOK_DIST_PLATFORMS=$(HOST_PLATFORM) $(GO) test -count=1 -run '^TestDistArchives$$' ./dev/packaging/

.PHONY: test-dist
# Without -race (make test has the race detector on this package): the checks
# hash, unpack and parse 12 archives of 60 MB, five times slower with it.
test-dist: krew ## release checks: archives, checksums, krew manifest validated and installed as krew does, kubectl khook via kubectl
	KHOOK_DIST=$(DIST) $(GO) test -count=1 -run 'TestDist|TestKrew' ./dev/packaging/

# The helm CLIs the plugin tests run (dev/packaging), built from
# the Go module proxy with the same compile flags as `make build`; kept in
# .cache/tools/helm-<version>/ and not rebuilt while there.
HELM3_VERSION  := v3.22.0
HELM4_VERSION  := v4.3.1
HELM3          := $(TOOLS_DIR)/helm-$(HELM3_VERSION)/helm
HELM4          := $(TOOLS_DIR)/helm-$(HELM4_VERSION)/helm

.PHONY: helm-tools
helm-tools: $(HELM3) $(HELM4) ## build the helm 3 and helm 4 CLIs the plugin tests use (once; .cache/tools)

$(TOOLS_DIR)/helm-v3.%/helm:
	@mkdir -p $(@D)
	GOBIN=$(@D) CGO_ENABLED=0 $(GO) install -trimpath -ldflags '-s -w' helm.sh/helm/v3/cmd/helm@v3.$*

$(TOOLS_DIR)/helm-v4.%/helm:
	@mkdir -p $(@D)
	GOBIN=$(@D) CGO_ENABLED=0 $(GO) install -trimpath -ldflags '-s -w' helm.sh/helm/v4/cmd/helm@v4.$*
