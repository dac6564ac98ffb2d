package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

func backupServer(t *testing.T, allowed func(uint32) bool, backup func(context.Context, io.Writer) (int64, error)) *wire.Client {
	t.Helper()
	s, err := server.New(server.Options{Verbs: unreachableVerbs(t), Health: fixedHolder(t, 0, 0), AdminAllowed: allowed, Backup: backup})
	if err != nil {
		t.Fatal(err)
	}
	cl := wire.NewUnixClient(serveUnix(t, s))
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

func snapshot(_ context.Context, w io.Writer) (int64, error) {
	n, err := w.Write([]byte("a snapshot"))
	return int64(n), err
}

func TestBackupIsStreamedToAnAllowedCaller(t *testing.T) {
	cl := backupServer(t, nil, snapshot) // the default policy: this process is the daemon's uid
	var buf bytes.Buffer
	n, err := cl.Backup(context.Background(), &buf)
	if err != nil || n != 10 || buf.String() != "a snapshot" {
		t.Fatalf("Backup = %d, %v, %q; want the snapshot", n, err, buf.String())
	}
}

func TestBackupRefusesAnyOtherUIDWithAdminForbidden(t *testing.T) {
	me := uint32(os.Geteuid())
	called := false
	cl := backupServer(t, func(uid uint32) bool { return uid != me }, func(ctx context.Context, w io.Writer) (int64, error) {
		called = true
		return snapshot(ctx, w)
	})
	var buf bytes.Buffer
	_, err := cl.Backup(context.Background(), &buf)
	var ae *wire.AdminError
	if !errors.As(err, &ae) || ae.ID != wire.AdminForbidden || ae.StatusCode != http.StatusForbidden {
		t.Fatalf("Backup by a refused uid: %v, want AdminForbidden (403)", err)
	}
	if called || buf.Len() != 0 {
		t.Fatalf("a refused caller got %q (backup called: %v)", buf.String(), called)
	}
}

func TestDefaultAdminPolicyIsTheDaemonsUIDAndRoot(t *testing.T) {
	me := uint32(os.Geteuid())
	if !server.DefaultAdminAllowed(0) || !server.DefaultAdminAllowed(me) {
		t.Errorf("root or the daemon's uid %d refused", me)
	}
	for _, uid := range []uint32{me + 1, 65534} {
		if uid != 0 && uid != me && server.DefaultAdminAllowed(uid) {
			t.Errorf("uid %d allowed", uid)
		}
	}
}

func TestBackupFailuresAreNamed(t *testing.T) {
	var buf bytes.Buffer
	_, err := backupServer(t, nil, nil).Backup(context.Background(), &buf)
	var ae *wire.AdminError
	if !errors.As(err, &ae) || ae.ID != wire.AdminUnsupported {
		t.Errorf("no Backup func: %v, want AdminUnsupported", err)
	}
	_, err = backupServer(t, nil, func(context.Context, io.Writer) (int64, error) { return 0, errors.New("disk on fire") }).Backup(context.Background(), &buf)
	if !errors.As(err, &ae) || ae.ID != wire.AdminFailed || ae.Detail != "disk on fire" {
		t.Errorf("failing Backup func: %v, want AdminFailed: disk on fire", err)
	}
	_, err = backupServer(t, nil, func(_ context.Context, w io.Writer) (int64, error) {
		w.Write([]byte("half"))
		return 4, errors.New("cut")
	}).Backup(context.Background(), &buf)
	if err == nil {
		t.Errorf("a snapshot cut short after its first bytes was accepted")
	}
}
