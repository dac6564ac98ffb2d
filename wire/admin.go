package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
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

// BackupTimeout bounds the write of one snapshot to the caller, in place of
// the server's WriteTimeout.
const BackupTimeout = 10 * time.Minute

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

// DefaultAdminAllowed is the administrative policy: the daemon's own
// effective uid, or root.
func DefaultAdminAllowed(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// adminUID returns the unix caller's uid, or why it has none an
// administrative request can use.
func adminUID(r *http.Request) (uint32, string) {
	if listenerOf(r) != ListenerUnix || r.TLS != nil {
		return 0, "administrative requests are accepted on the unix socket only"
	}
	id, problem := identity(r)
	if problem != "" {
		return 0, problem
	}
	s, ok := strings.CutPrefix(id, "unix-peer:uid=")
	if !ok {
		return 0, "the caller is not a unix peer"
	}
	uid, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, "the caller's uid is unreadable"
	}
	return uint32(uid), ""
}

// adminOnly answers AdminForbidden and returns false unless the request
// comes from an allowed uid on the unix socket.
func (s *Server) adminOnly(w http.ResponseWriter, r *http.Request, what string) bool {
	uid, problem := adminUID(r)
	if problem == "" && s.opts.AdminAllowed(uid) {
		return true
	}
	if problem == "" {
		problem = fmt.Sprintf("%s is allowed only for the daemon's uid %d or root; the caller is uid %d", what, os.Geteuid(), uid)
	}
	s.logger.LogAttrs(r.Context(), slog.LevelWarn, "administrative request refused", slog.String("path", r.URL.Path), slog.String("detail", problem))
	writeAdminError(w, http.StatusForbidden, AdminForbidden, problem)
	return false
}

func writeAdminError(w http.ResponseWriter, status int, id, detail string) {
	b, _ := json.Marshal(&AdminError{ID: id, Detail: detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// backup streams the registry snapshot.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	if !s.adminOnly(w, r, "backup") {
		return
	}
	if s.opts.Backup == nil {
		writeAdminError(w, http.StatusNotImplemented, AdminUnsupported, "the backend keeps no registry in the daemon's state directory (openbao: back up the OpenBao server)")
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(BackupTimeout))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	// The status is sent with the first bytes: a failure before any lets
	// the caller see AdminFailed; one after them cuts the body short, which
	// the client detects as a length mismatch (the trailer says how long).
	w.Header().Set("Trailer", "X-Backup-Bytes")
	lw := &lazyWriter{w: w}
	n, err := s.opts.Backup(r.Context(), lw)
	if err != nil {
		s.logger.LogAttrs(r.Context(), slog.LevelError, "backup failed", slog.Any("error", err))
		if !lw.started {
			writeAdminError(w, http.StatusInternalServerError, AdminFailed, err.Error())
			return
		}
		panic(http.ErrAbortHandler) // a truncated body, never a complete-looking one
	}
	w.Header().Set("X-Backup-Bytes", strconv.FormatInt(n, 10))
	s.logger.LogAttrs(r.Context(), slog.LevelInfo, "backup written", slog.Int64("bytes", n))
}

// lazyWriter sends the 200 status with the first byte.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

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
