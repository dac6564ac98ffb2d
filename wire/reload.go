package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// PathReload is the administrative endpoint of `registrar-otel reload`:
// POST re-reads the daemon's configuration file and environment, as
// SIGHUP does, and answers a ReloadResult: 200 when it applied, 422 when it
// was refused (nothing applied). Only the daemon's uid and root may ask
// (AdminForbidden, 403, for anyone else).
const PathReload = "/v1/admin/reload"

// ReloadChange is one key a reload changed (or would have changed), its
// values as the daemon's log shows them (secrets redacted).
type ReloadChange struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
	// RestartOnly marks a key a reload cannot apply.
	RestartOnly bool `json:"restart_only,omitempty"`
}

// ReloadResult is the answer to a reload.
type ReloadResult struct {
	// Applied reports that the new configuration is in force, whole.
	// False: nothing of it applied; Errors says why.
	Applied bool `json:"applied"`
	// Changes are the keys that differ from the configuration in force.
	Changes []ReloadChange `json:"changes"`
	// Errors are the reasons a reload was refused, each starting with
	// the key it concerns, as `config check` prints them.
	Errors []string `json:"errors"`
}

// Reload asks the daemon to reload its configuration and returns its
// answer, applied or refused. An administrative refusal (not the daemon's
// uid or root) is an *AdminError; an error otherwise means no answer.
func (c *Client) Reload(ctx context.Context) (*ReloadResult, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+PathReload, bytes.NewReader(nil))
	if err != nil {
		return nil, err
	}
	resp, err := c.send(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("wire: reading the reload answer of %s: %w", c.endpoint, err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusUnprocessableEntity:
		var res ReloadResult
		if err := json.Unmarshal(body, &res); err != nil {
			return nil, fmt.Errorf("%s answered HTTP %d to a reload, not a reload result: %.200q", c.endpoint, resp.StatusCode, body)
		}
		return &res, nil
	}
	return nil, c.adminRefusal(resp.StatusCode, body, "reload")
}
