package kube

import (
	"context"

	"k8s.io/client-go/rest"
)

type warningsKey struct{}

// WithWarnings returns a context whose requests hand the API server's
// warnings (code 299: a deprecated API, an unknown field a write
// ignored) to warn instead of the clients' own handler (Options.Warnings):
// a step's requests carry its context, so its warnings are told as its
// own, once per step (decision 225).
func WithWarnings(ctx context.Context, warn func(text string)) context.Context {
	return context.WithValue(ctx, warningsKey{}, warn)
}

// routedWarnings is the clients' warning handler: a request whose context
// carries a WithWarnings function goes there, any other to fallback.
type routedWarnings struct {
	fallback rest.WarningHandler
}

func (h routedWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if warn, ok := ctx.Value(warningsKey{}).(func(string)); ok && warn != nil {
		if code == 299 && text != "" {
			warn(text)
		}
		return
	}
	h.fallback.HandleWarningHeader(code, agent, text)
}
