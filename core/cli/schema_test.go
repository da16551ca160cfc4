package cli

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"khook.io/core/schema"
	"khook.io/core/steps/builtin"
)

// TestSchemaOptions: schema prints the JSON Schema with its $id.
func TestSchemaOptions(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	if err := (&SchemaOptions{Out: streams.Out, Steps: builtin.Registry}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.ID != schema.ID {
		t.Errorf("$id %q (want %q), %v", doc.ID, schema.ID, err)
	}
}
