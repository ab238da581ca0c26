package httpsink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Prober = (*Sink)(nil)

// Probe tells whether the destination is up without storing anything
// (consume.Prober): one GET of Config.ProbePath (or of the endpoint
// itself) on the next endpoint, with the Authorization of a store. Any
// answer but 5xx, 429, 408, 401 or 403 shows the service up (a POST-only
// endpoint's 405 does); no answer, or one of those, is down.
func (s *Sink) Probe(ctx context.Context) error {
	raw := s.picker.Pick()
	endpoint := Redact(raw)
	target, err := probeURL(raw, s.cfg.ProbePath)
	if err != nil {
		return fmt.Errorf("probe %s: %w", endpoint, err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", endpoint, err)
	}
	auth, err := s.authorization(ctx, "")
	if err != nil {
		return fmt.Errorf("probe %s: %w", endpoint, err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("probe GET %s: %w", endpoint, transportErr(err))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch c := resp.StatusCode; {
	case c >= 500, c == http.StatusTooManyRequests, c == http.StatusRequestTimeout,
		c == http.StatusUnauthorized, c == http.StatusForbidden:
		return fmt.Errorf("probe GET %s: HTTP %d %s", endpoint, c, http.StatusText(c))
	}
	return nil
}

// probeURL resolves path against the endpoint raw (raw itself when path
// is empty).
func probeURL(raw, path string) (string, error) {
	if path == "" {
		return raw, nil
	}
	base, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(path)
	if err != nil {
		return "", err
	}
	return base.ResolveReference(ref).String(), nil
}
