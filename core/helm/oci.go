package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// ociRef is an OCI chart reference: host/path/name (without scheme,
// credentials, tag or digest), with what pins its version.
type ociRef struct {
	name    string // host/path/name
	tag     string // inline :tag
	digest  string // @sha256:...
	version string // version: (an exact version or a constraint)
}

func (r ociRef) String() string {
	s := "oci://" + r.name
	switch {
	case r.digest != "":
		s += "@" + r.digest
	case r.tag != "":
		s += ":" + r.tag
	case r.version != "":
		s += " " + r.version
	}
	return s
}

func (r ociRef) host() string {
	h, _, _ := strings.Cut(r.name, "/")
	return h
}

// pullOCI resolves ref's version and pulls the chart archive with Helm's
// registry client, bound to ctx, authenticating with creds only (never a
// docker or Helm credentials file).
func (c *Client) pullOCI(ctx context.Context, ref ociRef, creds *Credentials) ([]byte, error) {
	rc, err := c.registryClient(ctx, ref.host(), creds)
	if err != nil {
		return nil, err
	}
	var pull string
	switch {
	case ref.digest != "":
		pull = ref.name + "@" + ref.digest
	case ref.tag != "":
		pull = ref.name + ":" + ref.tag
	default:
		tag, err := c.resolveOCITag(ctx, rc, ref)
		if err != nil {
			return nil, err
		}
		pull = ref.name + ":" + tag
	}
	res, err := rc.Pull(pull)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) && ref.digest == "" {
			// Say which versions exist, when the registry lets us list them.
			want := ref.tag
			if want == "" {
				want = ref.version
			}
			if tags, terr := rc.Tags(ref.name); terr == nil {
				return nil, fmt.Errorf("no version %s in oci://%s; %s", want, ref.name, describeNearest(tags, want))
			}
			return nil, fmt.Errorf("no version %s in oci://%s", want, ref.name)
		}
		return nil, ociError(err)
	}
	if res.Chart == nil || len(res.Chart.Data) == 0 {
		return nil, fmt.Errorf("%s holds no chart layer", pull)
	}
	return res.Chart.Data, nil
}

// resolveOCITag turns version: into a tag: an exact version is the tag
// itself (with + written _, as Helm pushes it); a constraint or no version
// picks the highest matching tag.
func (c *Client) resolveOCITag(ctx context.Context, rc *registry.Client, ref ociRef) (string, error) {
	if ref.version != "" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(ref.version, "v")); err == nil {
			return strings.ReplaceAll(ref.version, "+", "_"), nil
		}
	}
	tags, err := rc.Tags(ref.name)
	if err != nil {
		return "", fmt.Errorf("list versions: %w", ociError(err))
	}
	if len(tags) == 0 {
		return "", fmt.Errorf("oci://%s has no versions (no semver tags)", ref.name)
	}
	tag, err := registry.GetTagMatchingVersionOrConstraint(tags, ref.version)
	if err != nil {
		if ref.version == "" {
			return "", fmt.Errorf("oci://%s has no stable version; %s", ref.name, describeNearest(tags, ""))
		}
		if _, cerr := semver.NewConstraint(ref.version); cerr != nil {
			return "", fmt.Errorf("version %q is neither a version nor a constraint: %v", ref.version, cerr)
		}
		return "", fmt.Errorf("no version %s in oci://%s; %s", ref.version, ref.name, describeNearest(tags, ref.version))
	}
	return strings.ReplaceAll(tag, "+", "_"), nil
}

// registryClient is a registry client for one pull: its HTTP requests are
// bound to ctx (Helm's registry client takes no context), and it
// authenticates with creds against host only.
func (c *Client) registryClient(ctx context.Context, host string, creds *Credentials) (*registry.Client, error) {
	base := c.env.httpClient()
	httpClient := &http.Client{
		Transport:     &contextTransport{ctx: ctx, base: transportOf(base)},
		CheckRedirect: base.CheckRedirect,
		Timeout:       base.Timeout,
	}
	authorizer := auth.Client{Client: httpClient, Cache: auth.NewCache()}
	authorizer.SetUserAgent("khook")
	if creds != nil {
		authorizer.Credential = auth.StaticCredential(host, auth.Credential{Username: creds.Username, Password: creds.Password})
	}
	return registry.NewClient(
		registry.ClientOptHTTPClient(httpClient),
		registry.ClientOptAuthorizer(authorizer),
		registry.ClientOptWriter(io.Discard),
		// Never read Helm's registry login file: credentials come from the
		// spec. The path does not exist, which the client accepts.
		registry.ClientOptCredentialsFile(filepath.Join(os.TempDir(), "khook-no-registry-credentials", "config.json")),
	)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// contextTransport binds every request to ctx.
type contextTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t *contextTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(req.WithContext(t.ctx))
}

// ociError shortens a registry error to its status, without the request
// line.
func ociError(err error) error {
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("unauthorized (%d): check auth: or the credentials in the URL", resp.StatusCode)
		case http.StatusForbidden:
			return fmt.Errorf("forbidden (%d): the credentials have no access to this repository", resp.StatusCode)
		}
		if len(resp.Errors) > 0 {
			return fmt.Errorf("registry: %s (%d)", resp.Errors.Error(), resp.StatusCode)
		}
		return fmt.Errorf("registry: %s", http.StatusText(resp.StatusCode))
	}
	return err
}
