package helm

import (
	"context"
	"fmt"

	khelm "khook.io/core/helm"
	"khook.io/core/step"
)

// DestroyUninstall: destroy uninstalls the step's release.
var DestroyUninstall = step.DestroyAction{Word: "uninstall", Tally: "to uninstall", Rank: 20}

// PlanDestroy says what Destroy would do with the step's release,
// changing nothing: uninstall it when it exists. A helm release is
// khook's by its release record, created or upgraded alike.
func (e *Executor) PlanDestroy(ctx context.Context, req *step.Request) (p step.DestroyPlan, err error) {
	r, err := releaseOf(req)
	if err != nil {
		return p, err
	}
	it := step.DestroyItem{Object: fmt.Sprintf("release %s (%s)", r.Name, r.Namespace)}
	st, err := client(req).Get(ctx, r.Name, r.Namespace)
	switch {
	case err != nil:
		return p, err
	case st == nil:
		it.Action, it.Reason = step.DestroyGone, "not installed"
	default:
		it.Action, it.Reason = DestroyUninstall, st.String()
	}
	p.Items = append(p.Items, it)
	p.Carry = &khelm.Planned{Status: st}
	return p, nil
}
