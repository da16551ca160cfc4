// Package fetch reads url: sources (manifests, values files) over HTTP(S):
// bounded by the caller's context and a size cap, with URL userinfo sent as
// basic auth and never echoed in errors.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"khook.io/core/redact"
)

// MaxSize caps what one URL may return.
const MaxSize = 32 << 20

// NewClient returns the HTTP client a run shares.
func NewClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}

// Get fetches rawURL. Errors name the URL without its credentials.
func Get(ctx context.Context, c *http.Client, rawURL string) ([]byte, error) {
	shown := redact.StripURLUserinfo(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: invalid URL", shown)
	}
	var user, pass string
	hasAuth := false
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
		hasAuth = true
		u.User = nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", shown, err)
	}
	if hasAuth {
		req.SetBasicAuth(user, pass)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its message repeats the URL
		}
		return nil, fmt.Errorf("fetch %s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s", shown, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", shown, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("fetch %s: larger than %d MiB", shown, MaxSize>>20)
	}
	return data, nil
}
