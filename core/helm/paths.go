package helm

import (
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Fields of an object named as managedFields name them
// (objects.Fields): printed for the drift check; read with
// objects.LookupPath, written with objects.SetPath.

// pathName is a field's path as a plan and an outcome print it: data.b,
// spec.template.spec.containers[name="web"].image.
func pathName(p fieldpath.Path) string { return strings.TrimPrefix(p.String(), ".") }
