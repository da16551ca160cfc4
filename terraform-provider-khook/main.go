// Command terraform-provider-khook is khook as a Terraform/OpenTofu
// provider (source address khook-io/khook): the khook_spec resource plans,
// applies and destroys a khook spec with khook's own engine (khook.io/core),
// as the kubectl and helm plugins do.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"khook.io/core/version"
	"khook.io/terraform-provider-khook/internal/provider"
)

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider for a debugger (TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version.Get().Version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
