# The local test cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler (v1.35.4) and kwok, built from Go modules (hack/testbin), run
# as plain processes on loopback. See docs/test-cluster.md.
# Included by the top-level Makefile, which defines ROOT, CACHE, BIN and GO.

TESTBIN_DIR  := $(CACHE)/testbin
TESTCLUSTER  := $(TESTBIN_DIR)/khook-testcluster
CLUSTER_DIR  ?= $(CACHE)/cluster
INTEGRATION_PKGS ?= $(MODULES)

.PHONY: testbin
testbin: ## build the test-cluster binaries into .cache/testbin/bin (no-op when up to date; ~11 min cold)
	@GO=$(GO) $(ROOT)/hack/testbin/build.sh

# The starter itself (dev/cmd/khook-testcluster, module khook.io/dev): always
# handed to go build, whose cache makes a no-op rebuild about a second. Built
# with -race, like the tests: it then reuses the packages `go test -race`
# compiled (client-go), so `make test` compiles them once, not twice.
.PHONY: testcluster-tool
testcluster-tool:
	@mkdir -p $(TESTBIN_DIR)
	@cd $(ROOT) && $(GO) build -race -o $(TESTCLUSTER) ./dev/cmd/khook-testcluster

.PHONY: cluster-up
cluster-up: testbin testcluster-tool ## start the test cluster in .cache/cluster (reused when running); last line: export KUBECONFIG=...
	@$(TESTCLUSTER) up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: testcluster-tool ## stop the test cluster of cluster-up (every process, by PID); keeps its logs
	@$(TESTCLUSTER) down --dir $(CLUSTER_DIR)

.PHONY: cluster-status
cluster-status: testcluster-tool ## show the test cluster of cluster-up
	@$(TESTCLUSTER) status --dir $(CLUSTER_DIR)

# Only the tests of the integration-tagged files: the untagged ones ran in
# test-unit (hack/integration-tests.sh lists them and runs go test -run).
.PHONY: test-integration
test-integration: testbin ## integration tests (files tagged integration) against one fresh test cluster, always stopped afterwards
	@GO=$(GO) $(ROOT)/hack/with-cluster.sh \
		env KHOOK_BIN=$(BIN) GO=$(GO) $(ROOT)/hack/integration-tests.sh \
		-race -count=1 -tags 'integration $(TESTTAGS)' -p 2 -timeout 40m -- $(INTEGRATION_PKGS)
