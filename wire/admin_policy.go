package wire

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// This file is the administrative policy shared by the administrative
// endpoints (reload here; backup, issue 21, declares the same policy).

// The named errors of the administrative endpoints. They are outside the
// verbs' closed set of ErrorID: an administrative answer is never a verb's.
const (
	// AdminForbidden (403): the caller is neither the daemon's own uid nor
	// root, or did not come in on the unix socket.
	AdminForbidden = "AdminForbidden"
	// AdminUnsupported (501): the daemon does not offer this request.
	AdminUnsupported = "AdminUnsupported"
	// AdminFailed (500): the request failed part-way; the detail says why.
	AdminFailed = "AdminFailed"
)

// AdminError is the body of an administrative refusal, and the error the
// client's administrative calls return for one.
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
