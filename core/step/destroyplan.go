package step

import "context"

// DestroyPlanner is a Destroyer that can say, changing nothing, what its
// Destroy would do: the destroy plan shown before destroy asks, and by
// destroy --dry-run.
type DestroyPlanner interface {
	PlanDestroy(ctx context.Context, req *Request) (DestroyPlan, error)
}

// DestroyPlan is what destroy would do with one step's objects.
type DestroyPlan struct {
	Items []DestroyItem
	// Carry is the executor's own form of the plan, for its Destroy to
	// carry out (Request.Planned): what it read, as it read it. Only the
	// executor that made it reads it.
	Carry any
}

// DestroyItem is one object (or release) of a destroy plan: Action is
// what destroy does with it, as the kind declares it (DestroyDelete,
// DestroyRevert, ...; helm's uninstall), Reason why. Fields says, for an
// object destroy reverts, what becomes of each field khook wrote on it.
type DestroyItem struct {
	Object string
	Action DestroyAction
	Reason string
	Fields []DestroyField
}

// DestroyField is one field of a reverted object: its path, what becomes
// of it (objects.FieldOutcome: "restore", "remove", "stay", "lost",
// "same"), the value (JSON) it goes back to or the server gives it, and
// why.
type DestroyField struct {
	Path, Outcome, Value, Reason string
}

// redactDestroyPlan masks every secret in p, in place (object names can
// come from variables).
func (r *Request) redactDestroyPlan(p *DestroyPlan, err *error) {
	for i := range p.Items {
		it := &p.Items[i]
		it.Object, it.Reason = r.Redactor.String(it.Object), r.Redactor.String(it.Reason)
		for j := range it.Fields {
			f := &it.Fields[j]
			f.Path, f.Value, f.Reason = r.Redactor.String(f.Path), r.Redactor.String(f.Value), r.Redactor.String(f.Reason)
		}
	}
	*err = r.redactErr(*err)
}
