// Package tfacc holds the acceptance tests of the Terraform/OpenTofu
// provider (terraform-provider-khook): they drive a built OpenTofu CLI
// (.cache/tools/tofu-<version>, `make tofu`) against the test cluster, with
// the built provider wired through a CLI configuration's dev_overrides,
// never a registry. The tests are integration tests (-tags integration).
package tfacc
