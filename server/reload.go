package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/registrar-otel/registrar-otel/wire"
)

// reload runs the daemon's reload for an administrative caller.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if !s.adminOffered(w, r, "reload", s.opts.Reload != nil, "this server has no configuration to reload") {
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
	writeAdminJSON(w, status, b)
}
