package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// PathBackup is the administrative endpoint of `registrar-otel backup`:
// GET answers 200 with a consistent snapshot of the registry as the body
// (application/octet-stream).
const PathBackup = "/v1/admin/backup"

// The named errors of the administrative endpoints. They are outside the
// verbs' closed set of ErrorID: an administrative answer is never a verb's.
const (
	// AdminForbidden (403): the caller is neither the daemon's own uid nor
	// root, or did not come in on the unix socket.
	AdminForbidden = "AdminForbidden"
	// AdminUnsupported (501): the daemon does not offer this request: for
	// a backup, the backend keeps no registry the daemon can snapshot
	// (OpenBao: back up the OpenBao server instead); for a reload, the
	// server was built without a configuration to reload.
	AdminUnsupported = "AdminUnsupported"
	// AdminFailed (500): the request (a snapshot, a reload's answer)
	// failed part-way; the detail says why.
	AdminFailed = "AdminFailed"
)

// AdminError is the body of an administrative refusal, and the error
// Client.Backup and Client.Reload return for one.
type AdminError struct {
	// StatusCode is the HTTP status (set by the client).
	StatusCode int `json:"-"`
	// ID is AdminForbidden, AdminUnsupported or AdminFailed.
	ID string `json:"error"`
	// Detail says why, in a sentence.
	Detail string `json:"detail"`
}

func (e *AdminError) Error() string { return e.ID + ": " + e.Detail }

// Backup asks the daemon for a snapshot of its registry and writes it to
// w, returning the bytes written. An administrative refusal is an
// *AdminError; a snapshot cut short is an error. The client's timeout
// (WithTimeout) bounds the whole transfer.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+PathBackup, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("wire: GET %s on %s: %w", PathBackup, c.endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var ae AdminError
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		if json.Unmarshal(body, &ae) != nil || ae.ID == "" {
			return 0, fmt.Errorf("%s answered HTTP %d to a backup, not an administrative answer: %.200q", c.endpoint, resp.StatusCode, body)
		}
		ae.StatusCode = resp.StatusCode
		return 0, &ae
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("backup from %s cut short after %d bytes: %w", c.endpoint, n, err)
	}
	want, err := strconv.ParseInt(resp.Trailer.Get("X-Backup-Bytes"), 10, 64)
	if err != nil || want != n {
		return n, fmt.Errorf("backup from %s cut short: %d bytes received, the daemon reported %q", c.endpoint, n, resp.Trailer.Get("X-Backup-Bytes"))
	}
	return n, nil
}
