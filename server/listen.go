package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// Sentinel errors of ListenUnix, wrapped with the path.
var (
	// ErrSocketInUse: another process answers on the socket path.
	ErrSocketInUse = errors.New("wire: another process is listening on the socket")
	// ErrNotSocket: something that is not a socket exists at the path.
	ErrNotSocket = errors.New("wire: the socket path exists and is not a socket")
	// ErrUnsafeDir: the socket's directory is a symlink, not a directory,
	// group- or world-writable, or owned by another user.
	ErrUnsafeDir = errors.New("wire: unsafe socket directory")
	// ErrSocketGroup: the socket's group (ListenUnixOptions.Group) does not
	// exist, or the socket directory does not let it traverse.
	ErrSocketGroup = errors.New("wire: socket group")
	// ErrTLSFiles matches every error of ServerTLSConfig (and so of
	// ListenTLS before it listens): a certificate, key or client CA file
	// that cannot be read or does not hold what it must.
	ErrTLSFiles = errors.New("wire: TLS certificate, key or client CA file unusable")
)

// tlsFileError is an error of ServerTLSConfig: its text is the cause's,
// and it matches ErrTLSFiles besides the cause.
type tlsFileError struct{ err error }

func (e *tlsFileError) Error() string   { return e.err.Error() }
func (e *tlsFileError) Unwrap() []error { return []error{e.err, ErrTLSFiles} }

// staleDialTimeout bounds the probe of an existing socket. A socket
// nobody listens on refuses at once; the bound only matters for a
// listener with a full backlog, which counts as live.
const staleDialTimeout = time.Second

// ListenUnix listens on the unix socket at path, with the protocol's
// permissions:
//
//   - a missing parent directory is created 0700 (chmod after mkdir, so the
//     umask does not matter); an existing one is used as it is, provided it
//     is a real directory (not a symlink), owned by this user or root, and
//     neither group- nor world-writable;
//   - a socket file left at path by a dead process is removed; if a process
//     answers on it, or path is not a socket, ListenUnix refuses
//     (ErrSocketInUse, ErrNotSocket);
//   - the socket is chmod 0600 before the listener is returned, so before
//     anything is accepted. Between bind and chmod only this user can reach
//     it: the directory admits nobody else.
//
// Closing the listener removes the socket file.
func ListenUnix(path string) (net.Listener, error) {
	return ListenUnixGroup(path, SocketGroup{})
}

// SocketGroup is the group a unix socket is shared with. The zero value
// shares it with nobody.
type SocketGroup struct {
	// Name is the group's name, for messages.
	Name string
	// GID is the group's id; it applies when Name is not "".
	GID int
}

// ListenUnixGroup is ListenUnix with the socket shared with group g (when
// g.Name is not ""): the socket is chowned to the group and chmod 0660
// before the listener is returned; a missing parent directory is created
// 0750 with the group, so its members can traverse it; an existing one must
// let the group traverse it (group-owned with the group's x bit, or the
// world's x bit), else the error matches ErrSocketGroup. The other rules
// of the directory are ListenUnix's.
func ListenUnixGroup(path string, g SocketGroup) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("wire: ListenUnix: empty socket path")
	}
	dir := filepath.Dir(path)
	_, statErr := os.Lstat(dir)
	if err := socketDir(dir); err != nil {
		return nil, err
	}
	if g.Name != "" {
		if err := groupDir(dir, g, errors.Is(statErr, fs.ErrNotExist)); err != nil {
			return nil, err
		}
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("wire: listen on %s: %w", path, err)
	}
	mode := os.FileMode(0o600)
	if g.Name != "" {
		mode = 0o660
		if err := os.Lchown(path, -1, g.GID); err != nil {
			l.Close()
			return nil, fmt.Errorf("wire: chown %s to group %s: %w", path, g.Name, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("wire: chmod %04o %s: %w", mode, path, err)
	}
	return l, nil
}

// groupDir lets group g traverse the socket directory: one just created
// is given to the group with mode 0750; an existing one is checked.
func groupDir(dir string, g SocketGroup, created bool) error {
	if created {
		if err := os.Lchown(dir, -1, g.GID); err != nil {
			return fmt.Errorf("wire: chown socket directory %s to group %s: %w", dir, g.Name, err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			return fmt.Errorf("wire: chmod 0750 %s: %w", dir, err)
		}
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("wire: socket directory %s: %w", dir, err)
	}
	return CheckGroupDir(dir, fi, g)
}

// CheckGroupDir applies ListenUnixGroup's rule to an existing socket
// directory dir, whose os.Lstat is fi, without changing anything: group g
// must be able to traverse it (it is group-owned by g with the group's x
// bit, or has the world's x bit), else the error matches ErrSocketGroup.
// `registrar-otel config check` applies it; ListenUnixGroup does through
// it.
func CheckGroupDir(dir string, fi fs.FileInfo, g SocketGroup) error {
	perm := fi.Mode().Perm()
	if perm&0o001 != 0 || (perm&0o010 != 0 && fileGID(fi) == g.GID) {
		return nil
	}
	return fmt.Errorf("%w: the socket directory %s (mode %04o, group id %d) does not let group %s (id %d) traverse it; make it group %s with mode 0750, or mode 0755",
		ErrSocketGroup, dir, perm, fileGID(fi), g.Name, g.GID, g.Name)
}

// socketDir creates dir 0700 if it is missing and checks it either way,
// with privdir's rules (the owner rule included), worded as wire's errors.
func socketDir(dir string) error {
	_, err := privdir.Ensure(dir, privdir.Options{Owner: true, Ancestors: true})
	if err == nil {
		return nil
	}
	if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
		detail := ue.Detail()
		if ue.Problem == privdir.Writable {
			detail = fmt.Sprintf("is group- or world-writable (mode %04o)", ue.Mode)
		}
		return fmt.Errorf("%w: %s %s", ErrUnsafeDir, dir, detail)
	}
	se, ok := errors.AsType[*privdir.StepError](err)
	if !ok {
		return err
	}
	switch se.Step {
	case privdir.StepCreate:
		return fmt.Errorf("wire: create socket directory %s: %w", dir, err)
	case privdir.StepChmod:
		return fmt.Errorf("wire: chmod 0700 %s: %w", dir, err)
	}
	return fmt.Errorf("wire: socket directory %s: %w", dir, err)
}

// removeStale removes a socket at path nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("wire: socket path %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%w: %s (mode %s); remove it or choose another socket_path", ErrNotSocket, path, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s; is another daemon running?", ErrSocketInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("wire: probing the existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wire: removing the stale socket %s: %w", path, err)
	}
	return nil
}

// ListenTLS listens on addr (host:port) with mutual TLS: TLS 1.3 at least,
// HTTP/1.1, the certificate and key from certFile and keyFile, and a
// client certificate required and verified against the CAs in
// clientCAFile. A caller without a valid certificate fails the handshake
// and never reaches the protocol. Errors name the file at fault.
//
// Served by a Server, the handshakes are the server's: each runs in its own
// goroutine under the pre-handshake budget and timeout (Options). Accepted
// directly, the listener returns *tls.Conn connections, like
// tls.NewListener.
func ListenTLS(addr, certFile, keyFile, clientCAFile string) (net.Listener, error) {
	cfg, err := ServerTLSConfig(certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wire: listen on %s: %w", addr, err)
	}
	return &tlsListener{Listener: l, config: cfg}, nil
}

// tlsListener is ListenTLS's listener: the TCP listener and its TLS
// configuration, kept apart so the Server can run the handshakes itself.
type tlsListener struct {
	net.Listener
	config *tls.Config
}

// Accept returns the next connection as a *tls.Conn (handshake pending).
func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.config), nil
}

// ServerTLSConfig is ListenTLS's configuration. Its errors match
// ErrTLSFiles.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cfg, err := serverTLSConfig(certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, &tlsFileError{err}
	}
	return cfg, nil
}

func serverTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("wire: TLS certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("wire: TLS key file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("wire: TLS certificate file %s with key file %s: %w", certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("wire: TLS client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("wire: TLS client CA file %s: no PEM certificate in it", clientCAFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"http/1.1"},
	}, nil
}
