package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// BackupTimeout bounds the write of one snapshot to the caller, in place of
// the server's WriteTimeout.
const BackupTimeout = 10 * time.Minute

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
	writeAdminError(w, http.StatusForbidden, wire.AdminForbidden, problem)
	return false
}

// adminOffered is adminOnly, and then answers AdminUnsupported (501) with
// unsupported as the detail unless the server offers the request.
func (s *Server) adminOffered(w http.ResponseWriter, r *http.Request, what string, offered bool, unsupported string) bool {
	if !s.adminOnly(w, r, what) {
		return false
	}
	if !offered {
		writeAdminError(w, http.StatusNotImplemented, wire.AdminUnsupported, unsupported)
		return false
	}
	return true
}

func writeAdminError(w http.ResponseWriter, status int, id, detail string) {
	b, _ := json.Marshal(&wire.AdminError{ID: id, Detail: detail})
	writeAdminJSON(w, status, b)
}

// writeAdminJSON answers an administrative request with the JSON b.
func writeAdminJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// backup streams the registry snapshot.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	if !s.adminOffered(w, r, "backup", s.opts.Backup != nil,
		"the backend keeps no registry in the daemon's state directory (openbao: back up the OpenBao server)") {
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
			writeAdminError(w, http.StatusInternalServerError, wire.AdminFailed, err.Error())
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
