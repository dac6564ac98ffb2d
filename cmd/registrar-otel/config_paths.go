package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// they open them, worded with their error values, judged for j's user.
func checkPaths(res *checkResult, cfg *config.Config, j *judgedFor) {
	r := &cfg.Registrar
	wireRefuse := func(path, problem string) string { return fmt.Sprintf("%v: %s %s", server.ErrUnsafeDir, path, problem) }
	embeddedRefuse := func(path, problem string) string {
		return (&embedded.UnsafeStateError{Path: path, Problem: problem}).Error()
	}
	auditRefuse := func(path, problem string) string {
		return (&audit.UnsafeStoreError{Path: path, Problem: problem}).Error()
	}
	// serve reads and writes in the state and audit directories; it opens
	// the socket's to guard it and, unless systemd's socket unit hands the
	// socket over, binds the socket in it.
	sockNeed := uint32(mayRead | maySearch)
	if !j.handsOverSocket(r.SocketPath) {
		sockNeed |= mayWrite
	}
	sockDir := filepath.Dir(r.SocketPath)
	if _, err := os.Lstat(sockDir); errors.Is(err, fs.ErrNotExist) && j.handsOverSocket(r.SocketPath) {
		// The socket unit makes the directory when it binds the socket,
		// before serve starts (its DirectoryMode=).
		if err := j.checkAncestors(sockDir); err != nil {
			checkDir(res, j, "registrar.socket_path", sockDir, sockNeed, wireRefuse)
		} else {
			res.path("registrar.socket_path", sockDir, pathCreate, "missing; systemd's socket unit (%s) creates it when it binds the socket, before serve starts", j.socketUnit.Path)
		}
	} else {
		checkDir(res, j, "registrar.socket_path", sockDir, sockNeed, wireRefuse)
	}
	checkSocket(res, j, r.SocketPath, r.SocketGroup)
	checkSocketGroup(res, j, r.SocketPath, r.SocketGroup)
	if checkDir(res, j, "registrar.state_dir", r.StateDir, mayRead|mayWrite|maySearch, embeddedRefuse) != pathRefuse {
		checkFile(res, j, "registrar.state_dir", filepath.Join(r.StateDir, embedded.FileName), embeddedRefuse, "the embedded registry")
		checkSealKey(res, j, r.StateDir)
	}
	if checkDir(res, j, "registrar.audit_record_dir", r.AuditRecordDir, mayRead|mayWrite|maySearch, auditRefuse) != pathRefuse {
		checkFile(res, j, "registrar.audit_record_dir", filepath.Join(r.AuditRecordDir, audit.ActiveFileName), auditRefuse, "the active audit file")
	}
}

// refuser words a refusal the way the package that refuses it does.
type refuser func(path, problem string) string

// dirRules are the rules serve applies to all three directories (the
// socket's, the state and the audit directory): the owner rule and the
// ancestor rule besides privdir's own.
var dirRules = privdir.Options{Owner: true, Ancestors: true}

// checkDir applies the directory rules for j's user: a missing directory
// is created 0700 (refused when its nearest existing parent does not let
// the user create it);
// an existing one must pass privdir.CheckFor, the rules serve applies when
// it opens it, and give the user the access need; either way every
// directory above it must pass the ancestor rule (judgedFor.checkAncestors),
// since serve refuses a directory, existing or created, under an unsafe
// one. A directory the service unit's *Directory= names is judged as
// systemd leaves it at each start: owned by the user, with the
// directive's mode. It returns the finding's state.
func checkDir(res *checkResult, j *judgedFor, key, dir string, need uint32, refusing refuser) (state string) {
	defer func() { state = res.Paths[len(res.Paths)-1].State }()
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
	m, managed := j.managed(dir)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		parent, perr := existingParent(dir)
		switch {
		case perr != nil:
			res.path(key, dir, pathRefuse, "serve cannot create it: %v", perr)
		case refuseAncestors(j.checkAncestors(firstMissing(dir, parent))):
		case managed:
			res.path(key, dir, pathCreate, "missing; systemd creates it at each start, %s", m.gives(j))
		default:
			if ok, why := j.access(parent, mayWrite|maySearch); !ok {
				res.path(key, dir, pathRefuse, "missing, and serve, running as %s, could not create it in %s: %s; create it for that user, or run serve as a user that may write there", j.who(), parent, why)
			} else {
				res.path(key, dir, pathCreate, "missing; serve creates it 0700")
			}
		}
		return
	case err != nil:
		res.path(key, dir, pathRefuse, "%v", causeAt(err, dir))
		return
	}
	if managed {
		// systemd gives it to the user and restates the mode at each
		// start: the owner and mode on disk now are not serve's.
		if ue := privdir.CheckFor(dir, fi, privdir.Options{}, j.UID); ue != nil && ue.Problem != privdir.Writable {
			res.path(key, dir, pathRefuse, "%s", refusing(dir, ue.Detail()))
			return
		}
		if m.Mode&0o022 != 0 {
			res.path(key, dir, pathRefuse, "%s", refusing(dir, fmt.Sprintf("has mode %#o by %sMode= of %s (group- or world-writable; want 0700)", m.Mode, strings.TrimSuffix(m.Directive, "="), j.Unit)))
			return
		}
		if refuseAncestors(j.checkAncestors(dir)) {
			return
		}
		res.path(key, dir, pathOK, "directory; %s", m.gives(j))
		return
	}
	if ue := privdir.CheckFor(dir, fi, dirRules, j.UID); ue != nil {
		res.path(key, dir, pathRefuse, "%s", refusing(dir, ue.Detail()))
		return
	}
	if refuseAncestors(j.checkAncestors(dir)) {
		return
	}
	if ok, why := j.access(dir, need); !ok {
		res.path(key, dir, pathRefuse, "serve, running as %s, could not %s it: %s", j.who(), accessVerb(need), why)
		return
	}
	res.path(key, dir, pathOK, "directory, mode %#o", fi.Mode().Perm())
	return
}

// checkAncestors is privdir.CheckAncestorsFor for j's user, with the
// directories the unit's *Directory= names judged as systemd leaves them
// at each start (the user's, with the directive's mode): one of them
// above path passes if its mode does, and the directories above it are
// judged in turn.
func (j *judgedFor) checkAncestors(path string) error {
	at := path
	for {
		err := privdir.CheckAncestorsFor(at, j.UID)
		ue, ok := errors.AsType[*privdir.UnsafeError](err)
		if !ok {
			return err
		}
		ue.Path = path
		if m, managed := j.managed(ue.Above); !managed || m.Mode&0o022 != 0 || ue.Above == at {
			return ue
		}
		at = ue.Above
	}
}

// gives says what systemd does with a managed directory for j's user.
func (m managedDir) gives(j *judgedFor) string {
	return fmt.Sprintf("owned by %s with mode %#o (%s of %s)", j.who(), m.Mode, m.Directive, j.Unit)
}

// accessVerb names the access need asks for, for a message.
func accessVerb(need uint32) string {
	switch {
	case need&mayWrite != 0 && need&mayRead != 0:
		return "read and write in"
	case need&mayWrite != 0:
		return "write in"
	}
	return "open"
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
// naming the key and the group (serve exits 2 on it). When serve binds the
// socket (no socket unit hands it over), it also applies the rules of the
// bind: an existing socket directory must let the group traverse it
// (server.CheckGroupDir), and j's user must be root or a member of the
// group, or the socket cannot be given to it (serve's chown fails with
// "operation not permitted").
func checkSocketGroup(res *checkResult, j *judgedFor, socket, group string) {
	const key = "registrar.socket_group"
	if group == "" {
		return
	}
	g, err := daemon.LookupSocketGroup(group)
	if err != nil {
		res.errorf(key, "%v", err)
		return
	}
	if j.handsOverSocket(socket) {
		return // the socket unit's SocketGroup= applies; serve binds nothing
	}
	dir := filepath.Dir(socket)
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		if err := server.CheckGroupDir(dir, fi, g); err != nil {
			res.errorf(key, "%s %s: %v", key, group, err)
		}
	}
	if !j.root() && !slices.Contains(j.gids, uint32(g.GID)) {
		res.errorf(key, "%s %s: serve, running as %s, could not give the socket to this group: the user is not a member of it (make it one: SupplementaryGroups=%s in the unit, or usermod -aG %s %s; or let the socket unit bind the socket)",
			key, group, j.who(), g.Name, g.Name, j.User)
	}
}

// checkSocket applies the socket rules: absent is fine, a socket nobody
// answers on is replaced, anything else is refused; a socket the service's
// socket unit binds is systemd's, handed to serve. group is
// registrar.socket_group ("" for none).
func checkSocket(res *checkResult, j *judgedFor, path, group string) {
	const key = "registrar.socket_path"
	if j.handsOverSocket(path) {
		res.path(key, path, pathOK, "systemd's socket unit (%s) binds it and hands it to serve, with the unit's SocketMode= and SocketGroup=", j.socketUnit.Path)
		return
	}
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
// audit file: absent is created 0600; present must be a regular file that
// j's user may read and write (in a directory systemd gives to the user
// at each start, its files are given too).
func checkFile(res *checkResult, j *judgedFor, key, path string, refusing refuser, what string) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return // created with its directory; the directory finding covers it
	case err != nil:
		res.path(key, path, pathRefuse, "%v", causeAt(err, path))
	case fi.Mode()&fs.ModeSymlink != 0:
		res.path(key, path, pathRefuse, "%s", refusing(path, "is a symlink"))
	case !fi.Mode().IsRegular():
		res.path(key, path, pathRefuse, "%s", refusing(path, "is not a regular file"))
	default:
		if _, managed := j.managed(filepath.Dir(path)); !managed {
			if ok, why := j.access(path, mayRead|mayWrite); !ok {
				res.path(key, path, pathRefuse, "serve, running as %s, could not open it for writing: %s", j.who(), why)
				return
			}
		}
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

// causeAt is err without its path when it is a *fs.PathError of path (the
// finding names the path already), else unwrapPath's.
func causeAt(err error, path string) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == path {
		return pe.Err
	}
	return unwrapPath(err)
}

// unwrapPath keeps a *fs.PathError's path and cause without its op.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// checkSealKey reads the audit store's sealing key file in the state
// directory as serve does at start (audit.OpenSealKey): serve refuses to
// start on a key file it cannot trust (damaged, not a regular file, a
// symlink, readable by others) rather than stop sealing. No file: the store
// is not sealed, which needs no finding.
func checkSealKey(res *checkResult, j *judgedFor, stateDir string) {
	path := filepath.Join(stateDir, audit.SealKeyFileName)
	if _, err := os.Lstat(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			res.path("registrar.state_dir", path, pathRefuse, "%v", causeAt(err, path))
		}
		return
	}
	d, err := os.Open(stateDir)
	if err != nil {
		return // the directory's finding says why
	}
	defer d.Close()
	id, epoch, _, err := audit.CheckSealKey(d)
	if err != nil {
		res.path("registrar.state_dir", path, pathRefuse, "%v: serve refuses to start with it (audit seal init makes a new key; see the audit page, Sealing)", err)
		return
	}
	if _, managed := j.managed(stateDir); !managed {
		// Read only: serve replaces the file through the directory
		// (a new file renamed over it), which the directory's finding judges.
		if ok, why := j.access(path, mayRead); !ok {
			res.path("registrar.state_dir", path, pathRefuse, "serve, running as %s, could not read the sealing key: %s", j.who(), why)
			return
		}
	}
	res.path("registrar.state_dir", path, pathOK, "the audit store's sealing key %s at epoch %d: the store is sealed", id, epoch)
}
