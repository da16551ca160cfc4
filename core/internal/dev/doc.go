// Package dev holds the project's own tooling, none of which any plugin
// links: the local test cluster (testcluster), the end-to-end harness and
// tests of the built binaries (e2e), the provider's acceptance tests with a
// built OpenTofu (tfacc), release packaging (packaging), the container
// image (image), a loopback chart repository and OCI registry (chartrepo),
// step test fixtures (steptest), the spec generator (specgen) and the JUnit
// schema check (junitxsd).
//
// The runtime helpers the engine links stay beside it, in core/internal
// (yamlerr, english): TestLayout checks that the plugins link every one of
// those and nothing under dev.
package dev
