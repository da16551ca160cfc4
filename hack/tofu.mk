# OpenTofu (MPL-2.0, CLI-compatible with Terraform), the CLI the provider's
# acceptance tests (terraform-provider-khook) drive: built from its Go module
# (go install refuses it: its go.mod has replace directives) into
# .cache/tools/tofu-<version>/ once, and not rebuilt while there (about 3
# minutes on 2 cores). See docs/terraform.md.
# Included by the top-level Makefile, which defines CACHE and GO.

TOFU_VERSION := v1.12.6
TOFU         := $(CACHE)/tools/tofu-$(TOFU_VERSION)/tofu

.PHONY: tofu
tofu: $(TOFU) ## build the OpenTofu CLI the provider's acceptance tests use (once; .cache/tools)

$(CACHE)/tools/tofu-%/tofu:
	@GO=$(GO) $(ROOT)/hack/build-tofu.sh $* $@
