# The container image: kubectl-khook on linux, non-root, no shell, built
# reproducibly without Docker (dev/image, go-containerregistry).
# See docs/in-cluster.md.
# Included by the top-level Makefile after hack/dist.mk, whose DIST,
# DIST_VERSION, DIST_DATE, DIST_GOBUILD and TOOLS_DIR it uses.

# Where the image is published (the tag is the release version).
IMAGE_REPO      ?= ghcr.io/khook-io/khook
SOURCE_URL      ?= https://github.com/khook-io/khook
# linux_<arch> platforms: this machine's by default; e.g.
# `make image IMAGE_PLATFORMS="linux_amd64 linux_arm64"` for a
# multi-platform index (cross-compiles the other one).
IMAGE_PLATFORMS ?= linux_$(shell $(GO) env GOARCH)
IMAGE_DIR       ?= $(DIST)/image
IMAGETOOL       := $(TOOLS_DIR)/khook-image

.PHONY: image
image: image-tool $(addprefix image-bin-,$(IMAGE_PLATFORMS)) ## OCI image of kubectl-khook into dist/image: oci/ (layout, multi-platform index) and docker-save tarballs; IMAGE_PLATFORMS="linux_amd64 linux_arm64"
	$(IMAGETOOL) -out $(IMAGE_DIR) -version $(DIST_VERSION) -revision $(COMMIT) -date $(DIST_DATE) \
		-license $(ROOT)/LICENSE -licenses Apache-2.0 -repo $(IMAGE_REPO) -source $(SOURCE_URL) \
		$(foreach p,$(IMAGE_PLATFORMS),-binary $(subst _,/,$(p))=$(DIST)/bin/$(p)/kubectl-khook)

# The release build of kubectl-khook for one linux platform (make dist's
# flags: reproducible), next to make dist's binaries.
image-bin-%:
	@mkdir -p $(DIST)/bin/$*
	cd $(ROOT) && $(DIST_GOBUILD) -o $(DIST)/bin/$*/kubectl-khook ./kubectl-khook

.PHONY: image-tool
image-tool:
	@mkdir -p $(TOOLS_DIR)
	@cd $(ROOT) && CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGETOOL) ./dev/cmd/khook-image

.PHONY: image-repro
image-repro: image ## build the image a second time into .cache/image-repro and compare (reproducibility)
	$(MAKE) --no-print-directory image IMAGE_DIR=$(CACHE)/image-repro
	diff -r $(IMAGE_DIR) $(CACHE)/image-repro
	@echo "reproducible: the two builds' layouts and tarballs are identical"
