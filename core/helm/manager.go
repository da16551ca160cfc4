package helm

import (
	"context"
	"net/http"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/client-go/rest"
)

// fieldManagerTransport makes every write of one Helm operation carry
// manager as its field manager (the fieldManager query parameter of a
// POST, PUT or PATCH): the objects of the release, its hooks, its
// namespace and its storage Secrets. Helm's client takes its field
// manager from a process-wide variable (kube.ManagedFieldsManager, which
// the helm CLI sets to "helm", else the binary's name), read on every
// write; setting it would make one manager for every operation of the
// process, and race with the operations of a provider or a test that use
// another. The transport is the operation's own (helm builds its clients
// from restGetter.ToRESTConfig), so operations with different managers run
// side by side. Reads and deletes are left as they are (a delete has no
// field manager).
func fieldManagerTransport(manager string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &managerRoundTripper{next: next, manager: manager}
	}
}

type managerRoundTripper struct {
	next    http.RoundTripper
	manager string
}

func (t *managerRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *managerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return t.next.RoundTrip(req)
	}
	q := req.URL.Query()
	if q.Get("fieldManager") == t.manager && len(q["fieldManager"]) == 1 {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the request
	q.Set("fieldManager", t.manager)
	req.URL.RawQuery = q.Encode()
	return t.next.RoundTrip(req)
}

// warningHandler passes the API server's warnings of an operation's
// requests to Env.Warn, redacted; nil when there is no Warn (the run's
// own handler then gets them).
func (e Env) warningHandler() rest.WarningHandlerWithContext {
	if e.Warn == nil {
		return nil
	}
	return warnFunc(func(text string) { e.warn(text) })
}

// warn reports one warning, redacted.
func (e Env) warn(text string) {
	if e.Warn != nil && text != "" {
		e.Warn(e.Redactor.String(text))
	}
}

// warnFunc is a rest.WarningHandlerWithContext of a function. Code 299
// is the only warning code (RFC 7234's "Miscellaneous persistent
// warning", which the API server uses); others are ignored, as client-go's
// own handlers ignore them.
type warnFunc func(text string)

func (f warnFunc) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	if code == 299 && text != "" {
		f(text)
	}
}

// chartWarnings are the warnings the helm CLI prints about the chart of
// an install or upgrade: "this chart is deprecated" (helm 4's words; helm
// 3's: "This chart is deprecated").
func (c *Client) chartWarnings(ch *Chart) {
	if ch.Deprecated {
		c.env.warn("this chart is deprecated")
	}
}

// notes is the rendered NOTES.txt of rel.
func notes(rel *release.Release) string {
	if rel == nil || rel.Info == nil {
		return ""
	}
	return rel.Info.Notes
}
