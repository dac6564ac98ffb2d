package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	// server was built without a configuration to reload; for limits show
	// and reset, without the daemon's limiter to inspect.
	AdminUnsupported = "AdminUnsupported"
	// AdminFailed (500): the request (a snapshot, a reload's answer, a
	// limits show or reset) failed part-way; the detail says why.
	AdminFailed = "AdminFailed"
	// AdminBadRequest (400): the request itself is wrong (a limits
	// request's identity, verb or bucket; an unknown member or query
	// parameter); the detail names the member and what is wrong with it.
	AdminBadRequest = "AdminBadRequest"
)

// AdminError is the body of an administrative refusal, and the error
// Client.Backup, Client.Reload, Client.Limits and Client.LimitsReset
// return for one.
type AdminError struct {
	// StatusCode is the HTTP status (set by the client).
	StatusCode int `json:"-"`
	// ID is AdminForbidden, AdminUnsupported, AdminFailed or
	// AdminBadRequest.
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
	resp, err := c.send(hreq)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		return 0, c.adminRefusal(resp.StatusCode, body, "backup")
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

// adminRefusal is the error of an administrative answer with status: the
// *AdminError body holds, or an error saying the answer to what (a backup,
// a reload) was not an administrative one.
func (c *Client) adminRefusal(status int, body []byte, what string) error {
	var ae AdminError
	if json.Unmarshal(body, &ae) != nil || ae.ID == "" {
		return fmt.Errorf("%s answered HTTP %d to a %s, not an administrative answer: %.200q", c.endpoint, status, what, body)
	}
	ae.StatusCode = status
	return &ae
}
