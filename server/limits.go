package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/registrar-otel/registrar-otel/wire"
)

// limits answers GET /v1/admin/limits: the limiter's state of one identity,
// or of every identity with an entry, from Options.Limits.
func (s *Server) limits(w http.ResponseWriter, r *http.Request) {
	if !s.adminOffered(w, r, "limits show", s.opts.Limits != nil, "this server has no limiter to inspect") {
		return
	}
	if r.ContentLength != 0 {
		// A GET carries its one parameter in the query; a body (declared,
		// or chunked: -1) is refused rather than read.
		writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, "body: GET "+wire.PathLimits+" takes no body; name the identity as ?identity=ID")
		return
	}
	req, err := wire.DecodeLimitsQuery(r.URL.RawQuery)
	if err != nil {
		writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, wire.BoundDetail(err.Error()))
		return
	}
	ans, err := s.opts.Limits(r.Context(), req)
	if err != nil {
		s.adminFailed(w, r, "limits show", err)
		return
	}
	if ans.Identities == nil {
		ans.Identities = []wire.IdentityLimits{}
	}
	if ans.Overflow == nil {
		ans.Overflow = []wire.PoolOverflow{}
	}
	slices.SortStableFunc(ans.Identities, func(a, b wire.IdentityLimits) int { return strings.Compare(a.Identity, b.Identity) })
	if req.Identity != "" && (len(ans.Identities) != 1 || ans.Identities[0].Identity != req.Identity) {
		s.adminFailed(w, r, "limits show", fmt.Errorf("the daemon's answer holds %d identities, not the one asked for", len(ans.Identities)))
		return
	}
	b, err := marshalAdmin(&ans)
	if err == nil && len(b) > wire.MaxLimitsAnswerBytes {
		err = fmt.Errorf("the answer is %d bytes, more than the %d a client reads; ask for one identity (?identity=ID)", len(b), wire.MaxLimitsAnswerBytes)
	}
	if err != nil {
		s.adminFailed(w, r, "limits show", err)
		return
	}
	writeAdminJSON(w, http.StatusOK, b)
}

// limitsReset answers POST /v1/admin/limits/reset: Options.LimitsReset
// refills the buckets and records who reset what.
func (s *Server) limitsReset(w http.ResponseWriter, r *http.Request) {
	if !s.adminOffered(w, r, "limits reset", s.opts.LimitsReset != nil, "this server has no limiter to reset") {
		return
	}
	uid, _ := adminUID(r) // adminOffered has accepted it
	if problem := checkContentType(r.Header.Get("Content-Type")); problem != "" {
		writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, problem)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxLimitsResetBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, fmt.Sprintf("body: more than %d bytes", wire.MaxLimitsResetBodyBytes))
		} else {
			writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, "body: could not be read")
		}
		return
	}
	req, err := wire.DecodeLimitsReset(body)
	if err != nil {
		writeAdminError(w, http.StatusBadRequest, wire.AdminBadRequest, wire.BoundDetail(err.Error()))
		return
	}
	caller := UnixIdentity(uid)
	// The reset and its audit record must finish together: a caller hanging
	// up does not cancel them.
	ans, err := s.opts.LimitsReset(context.WithoutCancel(r.Context()), caller, req)
	if err != nil {
		s.adminFailed(w, r, "limits reset", err)
		return
	}
	if ans.Identity != req.Identity {
		s.adminFailed(w, r, "limits reset", errors.New("the daemon's answer names another identity than the one asked for"))
		return
	}
	if ans.Reset == nil {
		ans.Reset = []wire.KeyReset{}
	}
	b, err := marshalAdmin(&ans)
	if err != nil {
		s.adminFailed(w, r, "limits reset", err)
		return
	}
	s.logger.LogAttrs(r.Context(), slog.LevelInfo, "limits reset", slog.String("caller", caller), slog.String("identity", req.Identity),
		slog.String("verb", selected(req.Verb)), slog.String("bucket", selected(req.Bucket)), slog.Int("keys", len(ans.Reset)), slog.Bool("recorded", ans.Recorded))
	writeAdminJSON(w, http.StatusOK, b)
}

// selected is a reset's verb or bucket as the log spells it: "all" when
// the request left it out.
func selected[T fmt.Stringer](v *T) string {
	if v == nil {
		return "all"
	}
	return (*v).String()
}

// adminFailed logs a failed administrative request and answers
// AdminFailed (500) with the error.
func (s *Server) adminFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.logger.LogAttrs(r.Context(), slog.LevelError, what+" failed", slog.Any("error", err))
	writeAdminError(w, http.StatusInternalServerError, wire.AdminFailed, wire.BoundDetail(err.Error()))
}

// marshalAdmin encodes an administrative answer without escaping &, < and
// > (identities are not HTML; escaped they take six bytes each).
func marshalAdmin(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
