package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/registrar-otel/registrar-otel/wire"
)

// reload runs the daemon's reload for an administrative caller.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if !s.adminOnly(w, r, "reload") {
		return
	}
	if s.opts.Reload == nil {
		writeAdminError(w, http.StatusNotImplemented, wire.AdminUnsupported, "this server has no configuration to reload")
		return
	}
	res := s.opts.Reload(context.WithoutCancel(r.Context()))
	if res.Changes == nil {
		res.Changes = []wire.ReloadChange{}
	}
	if res.Errors == nil {
		res.Errors = []string{}
	}
	b, err := json.Marshal(&res)
	if err != nil {
		writeAdminError(w, http.StatusInternalServerError, wire.AdminFailed, err.Error())
		return
	}
	status := http.StatusOK
	if !res.Applied {
		status = http.StatusUnprocessableEntity
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
