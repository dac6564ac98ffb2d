package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/daemon"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/server"
)

// pathFinding is what serve would do with one path of the configuration.
type pathFinding struct {
	Key    string `json:"key"`
	Path   string `json:"path"`
	State  string `json:"state"` // one of the path* constants
	Detail string `json:"detail"`
}

// The states of a path finding.
const (
	pathOK     = "ok"     // exists and serve accepts it
	pathCreate = "create" // missing: serve creates it (directories 0700)
	pathRefuse = "refuse" // serve refuses it and does not start: an error
	pathStale  = "stale"  // a socket nobody answers on: serve replaces it
	pathInUse  = "in_use" // a daemon answers on the socket: a second serve refuses it
)

func (r *checkResult) path(key, path, state, format string, args ...any) {
	f := pathFinding{key, path, state, fmt.Sprintf(format, args...)}
	r.Paths = append(r.Paths, f)
	switch state {
	case pathRefuse:
		r.errorf(key, "%s %s: %s", key, path, f.Detail)
	case pathInUse:
		r.warnf(key, "%s %s: %s", key, path, f.Detail)
	}
}

// checkPaths reports, read-only, what serve does with the socket, state and
// audit paths: the same rules wire, backend/embedded and audit apply when
// they open them, worded with their error values.
func checkPaths(res *checkResult, cfg *config.Config) {
	r := &cfg.Registrar
	wireRefuse := func(path, problem string) string { return fmt.Sprintf("%v: %s %s", server.ErrUnsafeDir, path, problem) }
	embeddedRefuse := func(path, problem string) string {
		return (&embedded.UnsafeStateError{Path: path, Problem: problem}).Error()
	}
	auditRefuse := func(path, problem string) string {
		return (&audit.UnsafeStoreError{Path: path, Problem: problem}).Error()
	}
	checkDir(res, "registrar.socket_path", filepath.Dir(r.SocketPath), wireRefuse)
	checkSocket(res, r.SocketPath, r.SocketGroup)
	checkSocketGroup(res, r.SocketGroup)
	checkDir(res, "registrar.state_dir", r.StateDir, embeddedRefuse)
	checkFile(res, "registrar.state_dir", filepath.Join(r.StateDir, embedded.FileName), embeddedRefuse, "the embedded registry")
	checkDir(res, "registrar.audit_record_dir", r.AuditRecordDir, auditRefuse)
	checkFile(res, "registrar.audit_record_dir", filepath.Join(r.AuditRecordDir, audit.ActiveFileName), auditRefuse, "the active audit file")
}

// refuser words a refusal the way the package that refuses it does.
type refuser func(path, problem string) string

// dirRules are the rules serve applies to all three directories (the
// socket's, the state and the audit directory): the owner rule and the
// ancestor rule besides privdir's own.
var dirRules = privdir.Options{Owner: true, Ancestors: true}

// checkDir applies the directory rules: a missing directory is created 0700
// (if its nearest existing parent allows it); an existing one must pass
// privdir.Check, the rules serve applies when it opens it; either way every
// directory above it must pass the ancestor rule (privdir.CheckAncestors),
// since serve refuses a directory, existing or created, under an unsafe one.
func checkDir(res *checkResult, key, dir string, refusing refuser) {
	refuseAncestors := func(err error) bool {
		if err == nil {
			return false
		}
		if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
			res.path(key, dir, pathRefuse, "%s", refusing(dir, ue.Detail()))
		} else {
			res.path(key, dir, pathRefuse, "%v", unwrapPath(err))
		}
		return true
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		parent, perr := existingParent(dir)
		switch {
		case perr != nil:
			res.path(key, dir, pathRefuse, "serve cannot create it: %v", perr)
		case refuseAncestors(privdir.CheckAncestors(firstMissing(dir, parent))):
		case !writable(parent):
			res.path(key, dir, pathCreate, "missing; serve creates it 0700, but %s is not writable by uid %d: run serve as a user that may write there", parent, os.Geteuid())
		default:
			res.path(key, dir, pathCreate, "missing; serve creates it 0700")
		}
		return
	case err != nil:
		res.path(key, dir, pathRefuse, "%v", unwrapPath(err))
		return
	}
	if ue := privdir.Check(dir, fi, dirRules); ue != nil {
		res.path(key, dir, pathRefuse, "%s", refusing(dir, ue.Detail()))
		return
	}
	if refuseAncestors(privdir.CheckAncestors(dir)) {
		return
	}
	res.path(key, dir, pathOK, "directory, mode %#o", fi.Mode().Perm())
}

// firstMissing is the element of dir right below parent, its nearest
// existing ancestor: the directory serve creates first, whose ancestors
// (parent and above) are the ones that exist to be checked.
func firstMissing(dir, parent string) string {
	p := filepath.Clean(dir)
	for filepath.Dir(p) != parent && filepath.Dir(p) != p {
		p = filepath.Dir(p)
	}
	return p
}

// checkSocketGroup resolves registrar.socket_group as serve does when it
// binds the socket itself: a group the host does not have is an error
// naming the key and the group (serve exits 2 on it).
func checkSocketGroup(res *checkResult, group string) {
	if group == "" {
		return
	}
	if _, err := daemon.LookupSocketGroup(group); err != nil {
		res.errorf("registrar.socket_group", "%v", err)
	}
}

// checkSocket applies the socket rules: absent is fine, a socket nobody
// answers on is replaced, anything else is refused. group is
// registrar.socket_group ("" for none).
func checkSocket(res *checkResult, path, group string) {
	const key = "registrar.socket_path"
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if group != "" {
			res.path(key, path, pathCreate, "absent; serve creates the socket 0660 in group %s", group)
		} else {
			res.path(key, path, pathCreate, "absent; serve creates the socket 0600")
		}
		return
	case errors.Is(err, syscall.ENOTDIR):
		return // the directory finding says why
	case err != nil:
		res.path(key, path, pathRefuse, "%v", unwrapPath(err))
		return
	case fi.Mode().Type() != fs.ModeSocket:
		res.path(key, path, pathRefuse, "%v: %s (mode %s); remove it or choose another socket_path", server.ErrNotSocket, path, fi.Mode())
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		res.path(key, path, pathInUse, "a daemon is listening on it now; a second serve with this configuration would refuse it (%v)", server.ErrSocketInUse)
	case errors.Is(err, syscall.ECONNREFUSED):
		res.path(key, path, pathStale, "a socket nobody answers on (left by a stopped daemon); serve replaces it")
	default:
		res.path(key, path, pathRefuse, "probing the existing socket: %v", unwrapOp(err))
	}
}

// checkFile applies the file rules of the state database and the active
// audit file: absent is created 0600; present must be a regular file.
func checkFile(res *checkResult, key, path string, refusing refuser, what string) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return // created with its directory; the directory finding covers it
	case err != nil:
		res.path(key, path, pathRefuse, "%v", unwrapPath(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		res.path(key, path, pathRefuse, "%s", refusing(path, "is a symlink"))
	case !fi.Mode().IsRegular():
		res.path(key, path, pathRefuse, "%s", refusing(path, "is not a regular file"))
	default:
		res.path(key, path, pathOK, "%s, %d bytes", what, fi.Size())
	}
}

// existingParent returns the nearest existing ancestor of dir, or an error
// when one of them is not a directory (MkdirAll would fail).
func existingParent(dir string) (string, error) {
	p := filepath.Clean(dir)
	for {
		parent := filepath.Dir(p)
		fi, err := os.Stat(parent)
		switch {
		case err == nil && fi.IsDir():
			return parent, nil
		case err == nil:
			return "", fmt.Errorf("%s is not a directory", parent)
		case !errors.Is(err, fs.ErrNotExist):
			return "", unwrapPath(err)
		}
		if parent == p {
			return "", fmt.Errorf("no existing parent of %s", dir)
		}
		p = parent
	}
}

// unwrapPath keeps a *fs.PathError's path and cause without its op.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
