package wire

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// A call that cannot reach the daemon names the socket it tried, keeps the
// cause inspectable, and shows no placeholder URL.
func TestClientErrorNamesTheSocketNotAPlaceholderURL(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	_, err := NewUnixClient(sock).Mint(context.Background(), MintRequest{})
	if err == nil {
		t.Fatal("mint on a missing socket succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "POST /v1/mint on unix socket "+sock) || strings.Contains(msg, "http://") {
		t.Errorf("error %q: want the socket named and no URL", msg)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not wrap fs.ErrNotExist", msg)
	}
}
