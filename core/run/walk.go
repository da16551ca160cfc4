package run

import "context"

// Graph is the DAG a walk follows: nodes 0 to Len()-1 and their edges.
// *plan.Graph is one.
type Graph interface {
	Len() int
	// Needs lists the nodes node i waits for.
	Needs(i int) []int
	// Needers lists the nodes waiting for node i.
	Needers(i int) []int
}

// Reverse is g with every edge turned round: a node waits for the nodes
// that need it in g (destroy undoes a step once every step that needs it
// is undone).
func Reverse(g Graph) Graph { return reversed{g} }

type reversed struct{ g Graph }

func (r reversed) Len() int            { return r.g.Len() }
func (r reversed) Needs(i int) []int   { return r.g.Needers(i) }
func (r reversed) Needers(i int) []int { return r.g.Needs(i) }

// Visitor is what a walk does at each node. Every method but Visit is called
// on the walk's own goroutine, one call at a time, so a visitor keeps its
// records without a lock. Each node ends exactly once: through Skip, Done,
// Blocked or Unreached; the walk tells the nodes that need it as soon as
// the visitor has recorded its end.
type Visitor interface {
	// Skip is asked when every need of node i has ended and a slot is free:
	// skip reports that node i ends at once, without running (the visitor
	// records how), and ok whether the nodes that need it may run.
	Skip(i int) (skip, ok bool)
	// Visit does node i's work on a goroutine of its own, holding a slot.
	Visit(ctx context.Context, i int)
	// Done records the end of node i's Visit. ok: the nodes that need it may
	// run; a non-nil stop stops the walk: nothing new starts, what runs
	// goes on.
	Done(i int) (ok bool, stop error)
	// Blocked records that node i will not run: node need, which it needs,
	// ended not ok.
	Blocked(i, need int)
	// Unreached records that node i never ran: the walk stopped first (cause
	// is why: the walk's context ended, or what Done returned), or, cause
	// nil, its needs never all ended (a cycle).
	Unreached(i int, cause error)
}

// Walker walks a graph: it starts each node once every node it needs has
// ended ok, at most Limit nodes at once (0: no limit), and stops starting
// nodes when its context ends or a node's end says so. It knows nothing of
// what a node does, after Terraform's dag.Walker; its Visitor decides.
type Walker struct {
	Graph Graph
	Limit int
}

// node states of a walk
const (
	nodeWaiting = iota
	nodeRunning
	nodeEnded
)

// walk is one walk's state, kept by the walk's goroutine alone.
type walk struct {
	g     Graph
	v     Visitor
	state []int
	unmet []int // needs not yet ended, per node
	ready []int // nodes whose needs have all ended ok, first ready first
	left  int   // nodes not ended
}

// Walk visits every node of the graph and returns when each has ended and
// every Visit has returned. Nodes become ready in the order their last need
// ends (at the start: in node order) and start in that order.
func (w *Walker) Walk(ctx context.Context, v Visitor) {
	n := w.Graph.Len()
	s := &walk{g: w.Graph, v: v, state: make([]int, n), unmet: make([]int, n), left: n}
	for i := range n {
		s.unmet[i] = len(w.Graph.Needs(i))
		if s.unmet[i] == 0 {
			s.ready = append(s.ready, i)
		}
	}
	var (
		stop   error // why nothing new starts; the first cause stands
		active int
		doneCh = make(chan int, n) // a node's Visit has returned
	)
	for s.left > 0 {
		if stop == nil && ctx.Err() != nil {
			stop = ctx.Err()
		}
		for len(s.ready) > 0 && stop == nil && (w.Limit <= 0 || active < w.Limit) {
			i := s.ready[0]
			s.ready = s.ready[1:]
			if s.state[i] != nodeWaiting {
				continue
			}
			if skip, ok := v.Skip(i); skip {
				s.end(i, ok)
				continue
			}
			s.state[i] = nodeRunning
			active++
			go func() {
				v.Visit(ctx, i)
				doneCh <- i
			}()
		}
		if active == 0 {
			// nothing runs and nothing can start: the rest never will
			for i := range n {
				if s.state[i] == nodeWaiting {
					v.Unreached(i, stop)
					s.end(i, false)
				}
			}
			break
		}
		i := <-doneCh
		active--
		ok, why := v.Done(i)
		if stop == nil {
			stop = why
		}
		s.end(i, ok)
	}
}

// end marks node i ended, which the visitor has recorded. When ok, a node
// that needs it becomes ready once all its needs have ended; otherwise
// each waiting node that needs it is blocked, and ends too (depth first).
func (s *walk) end(i int, ok bool) {
	s.state[i] = nodeEnded
	s.left--
	for _, j := range s.g.Needers(i) {
		switch {
		case s.state[j] != nodeWaiting:
		case !ok:
			s.v.Blocked(j, i)
			s.end(j, false)
		default:
			s.unmet[j]--
			if s.unmet[j] == 0 {
				s.ready = append(s.ready, j)
			}
		}
	}
}
