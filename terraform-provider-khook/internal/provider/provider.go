// Package provider is the khook Terraform/OpenTofu provider: one resource,
// khook_spec, running khook's engine (khook.io/core/cli's Embedded) in
// process.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// Address is the provider's source address.
const Address = "registry.terraform.io/khook-io/khook"

// khookProvider has no configuration: the cluster's connection is each
// khook_spec's own kubernetes block, so that it may be another resource's
// output, unknown until that resource exists.
type khookProvider struct {
	version string
}

// New returns the provider's constructor for providerserver.Serve.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &khookProvider{version: version} }
}

func (p *khookProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "khook"
	resp.Version = p.version
}

func (p *khookProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Runs khook specs (apiVersion: khook.io/v1, kind: Khook) against Kubernetes clusters with khook's own engine. The provider takes no configuration: each khook_spec has its connection.",
	}
}

func (p *khookProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *khookProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newSpecResource}
}

func (p *khookProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
