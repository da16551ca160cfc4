package spec

import "strconv"

// triggers checks step i's triggeredBy: each entry names a step among its
// needs, transitively (a step it runs after), once.
func (v *validator) triggers(steps []Step, i int, names map[string]int) {
	st := &steps[i]
	if len(st.TriggeredBy) == 0 {
		return
	}
	p := "steps[" + strconv.Itoa(i) + "].triggeredBy"
	if len(st.Needs) == 0 {
		v.errf(p, "triggeredBy names steps among the step's needs, and it has none")
		return
	}
	before := NeedsClosure(steps, i, names)
	seen := map[string]bool{}
	for j, n := range st.TriggeredBy {
		np := p + "[" + strconv.Itoa(j) + "]"
		_, exists := names[n]
		switch {
		case n == "":
			v.errf(np, "must not be empty")
		case n == st.Name:
			v.errf(np, "a step cannot be triggered by itself")
		case seen[n]:
			v.errf(np, "%q is listed twice", n)
		case !exists:
			v.errf(np, "no step named %q%s", n, didYouMean(n, names))
		case !before[n]:
			v.errf(np, "%q is not among the needs of step %q, directly or transitively: a step can be triggered only by a step it runs after (add it to needs)", n, st.Name)
		}
		seen[n] = true
	}
}

// NeedsClosure is the set of the names of the steps step i needs,
// directly or transitively; names indexes steps by name. Needs naming no
// step are left out (the validator reports them), and a cycle ends the
// walk.
func NeedsClosure(steps []Step, i int, names map[string]int) map[string]bool {
	out := map[string]bool{}
	stack := []int{i}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range steps[k].Needs {
			j, ok := names[n]
			if !ok || out[n] {
				continue
			}
			out[n] = true
			stack = append(stack, j)
		}
	}
	return out
}
