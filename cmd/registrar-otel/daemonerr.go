package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"

	"github.com/registrar-otel/registrar-otel/wire"
)

// daemonAddr is where a client command connects: a unix socket, or a TCP
// address with mutual TLS.
type daemonAddr struct {
	socket     string // the unix socket path, "" for TLS
	tls        string // host:port for --tls-addr
	fromConfig string // the --config file the socket path came from, "" for none
	// fromDefault: the socket path is the embedded default (no --socket,
	// no --config), relative to the working directory.
	fromDefault bool
}

func (a daemonAddr) String() string {
	if a.tls != "" {
		return a.tls + " (TLS)"
	}
	return a.socket
}

// transportError prints what kept verb from getting a protocol answer, in
// words a person can act on: the endpoint it tried, why it failed, and
// what to do. It returns exitTransport.
func transportError(stderr io.Writer, verb string, addr daemonAddr, err error) int {
	fmt.Fprintf(stderr, "registrar-otel %s: %s\n", verb, explainTransport(addr, err))
	return exitTransport
}

// explainTransport turns a wire client error into a message and a hint.
func explainTransport(addr daemonAddr, err error) string {
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	start := "start the daemon with 'registrar-otel serve'"
	if addr.fromConfig != "" {
		start = "start the daemon with 'registrar-otel serve --config " + addr.fromConfig + "'"
	}
	point := "or point at its socket with --socket PATH (or at its configuration with --config FILE)"
	if addr.fromConfig != "" {
		point = "or point at the daemon's socket with --socket PATH"
	}
	if addr.tls != "" {
		switch {
		case dial && errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Sprintf("nothing listens on %s (connection refused)\n  is the daemon running ('registrar-otel serve') with registrar.tls_listen = %q?", addr.tls, addr.tls)
		case dial:
			return fmt.Sprintf("cannot connect to %s: %v\n  check --tls-addr and that the daemon is running ('registrar-otel serve')", addr.tls, unwrapOp(err))
		}
		return fmt.Sprintf("no protocol answer from %s: %v", addr, err)
	}
	where := describePath(addr.socket, addr.fromDefault)
	var nt *wire.ServerNotTrustedError
	switch {
	case errors.As(err, &nt) && nt.Unmapped:
		return fmt.Sprintf("refused to talk to the server on %s: its uid is not mapped into this user namespace (the kernel reports it as %d, as it would any unmapped user's process), and others may write the socket's directory; nothing was sent\n  who the server is cannot be told from inside the namespace: run the command outside it, or use the daemon's own socket", where, nt.UID)
	case errors.As(err, &nt):
		return fmt.Sprintf("refused to talk to the server on %s: it runs as uid %d, neither root nor the daemon's user; nothing was sent\n  another user's process may be answering in the registrar's place: name the daemon's configuration with --config FILE (its registrar.state_dir's owner is the daemon's user), or its real socket with --socket PATH", where, nt.UID)
	case dial && errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("no daemon socket at %s (no such file)\n  %s, %s", where, start, point)
	case dial && errors.Is(err, syscall.ECONNREFUSED) && !isSocket(addr.socket):
		// Connecting to a regular file is refused too; serve would not
		// replace it (it replaces only a stale socket), so say what it is.
		return fmt.Sprintf("%s is not a socket (%s): serve refuses to replace it\n  remove it if it is not needed, or set registrar.socket_path elsewhere; %s", where, fileKind(addr.socket), point)
	case dial && errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("the daemon is not running: %s exists but refuses connections (a socket left by a stopped daemon)\n  %s (it replaces the stale socket), %s", where, start, point)
	case dial && errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("permission denied on %s: the socket belongs to the daemon's user (0600), or to its group of callers (0660, registrar.socket_group or the socket unit's SocketGroup=)\n  run this command as that user or a member of that group (uid %d cannot connect)", where, os.Geteuid())
	case dial && errors.Is(err, syscall.ENOTSOCK):
		return fmt.Sprintf("%s is not a socket (%s): serve refuses to replace it\n  remove it if it is not needed, or set registrar.socket_path elsewhere; %s", where, fileKind(addr.socket), point)
	case dial:
		return fmt.Sprintf("cannot connect to the daemon at %s: %v\n  %s, %s", where, unwrapOp(err), start, point)
	}
	return fmt.Sprintf("no protocol answer from the daemon at %s: %v", where, err)
}

// isSocket reports whether path names a unix socket (not following a
// symlink); false when it cannot tell.
func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// fileKind names what is at path, for a message.
func fileKind(path string) string {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return "cannot tell: " + err.Error()
	case fi.Mode().IsRegular():
		return "a regular file"
	case fi.IsDir():
		return "a directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a " + fi.Mode().Type().String() + " file"
}

// unwrapOp returns the innermost cause under a *net.OpError, for a short
// message ("connection timed out" rather than the whole chain).
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err
		}
		return op.Err
	}
	return err
}
