package waiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"khook.io/core/kube"
)

// retry is how a watch that cannot list or watch (the API server is
// down, restarting, or overloaded) tries again: within about a second,
// for as long as the wait lasts. client-go's default backs off to 30-60 s,
// so a wait would notice its condition up to a minute after the server
// came back; a handful of watches retrying once a second is no load.
var retry = wait.Backoff{
	Duration: 100 * time.Millisecond,
	Factor:   2,
	Jitter:   0.2,
	Steps:    10,
	Cap:      time.Second,
}

// scopeWatch is one watch, by a client-go Reflector, into a store of its
// own: of one target, or of the namespace several named targets of one
// type share.
type scopeWatch struct {
	reflector *cache.Reflector
	store     *notifyingStore
	subject   string // "Deployment ns/web", "pods in namespace x"
	lastErr   errorBox
}

// run lists and watches until ctx ends.
func (w *scopeWatch) run(ctx context.Context) { w.reflector.RunWithContext(ctx) }

// hasSynced reports whether the first list reached the store.
func (w *scopeWatch) hasSynced() bool {
	select {
	case <-w.store.synced:
		return true
	default:
		return false
	}
}

// newScopeWatch builds the watch of t. Every List and Watch call reports
// to conn: a failure no retry can cure (forbidden, a type no longer
// served) goes to fatal, any other is retried by retry and reported as
// the API server being unreachable until a call succeeds again.
func newScopeWatch(c *kube.Clients, t Target, notify func(), fatal chan<- error, conn *connection, keepGone bool) (*scopeWatch, error) {
	sc, err := newScope(c, t)
	if err != nil {
		return nil, err
	}
	ri, tweak := sc.ri, sc.tweak
	w := &scopeWatch{subject: subject(sc.t)}
	outcome := func(ctx context.Context, err error) {
		switch {
		case err == nil:
			w.lastErr.set(nil)
			conn.succeeded()
		case ctx.Err() != nil:
		case permanent(err):
			select {
			case fatal <- fmt.Errorf("wait for %s: %s", w.subject, serverMessage(err)):
			default:
			}
		default:
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				w.lastErr.set(err)
			}
			conn.failed(err)
		}
	}
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		// the reflector retries (see retry) and reports each failure: the
		// clients' own connection retries would hide an outage from it
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			list, err := ri.List(kube.WithoutRetries(ctx), o)
			outcome(ctx, err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			wi, err := ri.Watch(kube.WithoutRetries(ctx), o)
			if err != nil && o.SendInitialEvents != nil && *o.SendInitialEvents &&
				!utilnet.IsConnectionRefused(err) && !apierrors.IsTooManyRequests(err) {
				// a watch-list attempt: the reflector retries these two
				// errors, and on any other lists instead (a server without
				// watch-list refuses the option): that List reports
				return wi, err
			}
			outcome(ctx, err)
			return wi, err
		},
	}, c.Dynamic)
	w.store = newNotifyingStore(notify)
	if keepGone {
		w.store.gone = map[string]*unstructured.Unstructured{}
	}
	quiet := logr.Discard() // see Wait
	backoff := retry
	w.reflector = cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, w.store, cache.ReflectorOptions{
		Name:            w.subject,
		TypeDescription: w.subject,
		Logger:          &quiet,
		Backoff:         &backoff,
	})
	return w, nil
}

// notifyingStore is a thread-safe store that calls notify after every
// change, drops managed fields (never read, often most of an object), and
// closes synced at the first full list. With gone not nil, it keeps the
// last state of every object deleted while watched: the delete event's
// object, or, when a relist no longer finds an object (a watch broke
// meanwhile), the state last seen.
type notifyingStore struct {
	cache.Store
	notify     func()
	synced     chan struct{}
	syncedOnce sync.Once

	goneMu sync.Mutex
	gone   map[string]*unstructured.Unstructured
}

func newNotifyingStore(notify func()) *notifyingStore {
	return &notifyingStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), notify: notify, synced: make(chan struct{})}
}

func slim(obj any) any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj
}

func (s *notifyingStore) Add(obj any) error {
	s.forget(obj)
	err := s.Store.Add(slim(obj))
	s.notify()
	return err
}

func (s *notifyingStore) Update(obj any) error {
	s.forget(obj)
	err := s.Store.Update(slim(obj))
	s.notify()
	return err
}

func (s *notifyingStore) Delete(obj any) error {
	s.remember(slim(obj))
	err := s.Store.Delete(obj)
	s.notify()
	return err
}

func (s *notifyingStore) Replace(list []any, rv string) error {
	for i := range list {
		list[i] = slim(list[i])
	}
	if s.gone != nil {
		listed := make(map[string]bool, len(list))
		for _, o := range list {
			if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
				listed[k] = true
			}
		}
		for _, old := range s.Store.List() {
			if k, err := cache.MetaNamespaceKeyFunc(old); err == nil && !listed[k] {
				s.remember(old)
			}
		}
		for k := range listed {
			s.forgetKey(k)
		}
	}
	err := s.Store.Replace(list, rv)
	s.syncedOnce.Do(func() { close(s.synced) })
	s.notify()
	return err
}

// remember keeps obj's state as its last, when the store keeps the gone.
func (s *notifyingStore) remember(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if s.gone == nil || !ok {
		return
	}
	k, err := cache.MetaNamespaceKeyFunc(u)
	if err != nil {
		return
	}
	s.goneMu.Lock()
	s.gone[k] = u
	s.goneMu.Unlock()
}

// forget drops the last state of obj's key: it exists (again).
func (s *notifyingStore) forget(obj any) {
	if s.gone == nil {
		return
	}
	if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		s.forgetKey(k)
	}
}

func (s *notifyingStore) forgetKey(k string) {
	s.goneMu.Lock()
	delete(s.gone, k)
	s.goneMu.Unlock()
}

// lastOf is the last state of the object of key k, deleted while
// watched; nil when it was not (or the store keeps no gone objects).
func (s *notifyingStore) lastOf(k string) *unstructured.Unstructured {
	if s.gone == nil {
		return nil
	}
	s.goneMu.Lock()
	defer s.goneMu.Unlock()
	return s.gone[k]
}

// connection is whether the watches of one wait reach the API server:
// the first failure of a List or Watch call after a success makes it
// down, the first success after failures makes it up again. Each change
// calls notify, so the wait says so in its progress.
type connection struct {
	notify func()
	mu     sync.Mutex
	down   bool
	since  time.Time // when it went down
	last   error     // the last failure
}

func (c *connection) failed(err error) {
	c.mu.Lock()
	changed := !c.down
	if changed {
		c.down, c.since = true, time.Now()
	}
	c.last = err
	c.mu.Unlock()
	if changed {
		c.notify()
	}
}

func (c *connection) succeeded() {
	c.mu.Lock()
	changed := c.down
	c.down = false
	c.mu.Unlock()
	if changed {
		c.notify()
	}
}

// state is a snapshot: whether the API server is unreachable, since when
// and why.
func (c *connection) state() (down bool, since time.Time, last error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down, c.since, c.last
}
