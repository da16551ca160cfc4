// Package dev is the root of module khook.io/dev, the project's own
// tooling, apart from the product so that core/go.mod lists only what the
// engine and core's own tests need (as Flux keeps its test servers in
// modules of their own): release packaging (packaging, cmd/khook-dist),
// the container image (image, cmd/khook-image), the end-to-end tests of
// the built binaries and their harness (e2e), the provider's acceptance
// tests with a built OpenTofu (tfacc), and the commands the Makefile and
// bench/ build: cmd/khook-testcluster (the local test cluster) and
// cmd/khook-specgen (generated specs). No plugin links any of it.
//
// What core's own tests share with this module stays in core, under
// core/testing (importable from here, unlike core/internal): the test
// cluster (testcluster), step test fixtures (steptest), a loopback chart
// repository and OCI registry (chartrepo), the JUnit schema check
// (junitxsd), the spec generator (specgen) and the repository root and
// the helm CLIs the tests compare with (testenv).
//
// TestLayout checks the split: the entrypoints link nothing of core/testing
// or of this module, core holds nothing else they do not link, every
// package of core/testing serves core's own tests, and core/go.mod is tidy.
package dev
