package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

var (
	t0       = time.Date(2026, 8, 23, 12, 34, 56, 789_000_000, time.UTC)
	baseSpec = registrar.Spec{Component: "collector", ServiceName: "otel", Reload: "sighup"}
)

const (
	regID = "web1-collector"
	host  = "web1"
	ttl   = 5 * time.Minute
)

func baseOp() registrar.MintOp {
	return registrar.MintOp{RegistrationID: regID, Host: host, Spec: baseSpec, WrapTTL: ttl, Now: t0}
}

// openBackend opens a backend in dir (a fresh temp dir when empty) and
// closes it at the end of the test.
func openBackend(t testing.TB, dir string, opts embedded.Options) *embedded.Backend {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "state")
	}
	b, err := embedded.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mint(t testing.TB, b *embedded.Backend, op registrar.MintOp) (registrar.MintStatus, registrar.Material) {
	t.Helper()
	st, m, err := b.Mint(context.Background(), op)
	if err != nil {
		t.Fatalf("Mint(%s): %v", op.RegistrationID, err)
	}
	return st, m
}

func binding(t testing.TB, b *embedded.Backend, id string) (embedded.Binding, bool) {
	t.Helper()
	bnd, ok, err := b.Binding(id)
	if err != nil {
		t.Fatalf("Binding(%s): %v", id, err)
	}
	return bnd, ok
}

func verify(t testing.TB, b *embedded.Backend, id, secret string, now time.Time) bool {
	t.Helper()
	ok, err := b.VerifySecret(id, secret, now)
	if err != nil {
		t.Fatalf("VerifySecret(%s): %v", id, err)
	}
	return ok
}

func TestMintAnswersEachStatus(t *testing.T) {
	other := func(f func(*registrar.MintOp)) registrar.MintOp {
		op := baseOp()
		op.Now = t0.Add(time.Minute)
		f(&op)
		return op
	}
	tests := []struct {
		name  string
		prior bool // a first mint of baseOp happened before op
		op    registrar.MintOp
		want  registrar.MintStatus
	}{
		{"a first mint creates the binding", false, baseOp(), registrar.MintCreated},
		{"the same host and spec re-issue", true, other(func(*registrar.MintOp) {}), registrar.MintReissued},
		{"another host collides", true, other(func(op *registrar.MintOp) { op.Host = "web2" }), registrar.MintCollision},
		{"another component conflicts", true, other(func(op *registrar.MintOp) { op.Spec.Component = "agent" }), registrar.MintSpecConflict},
		{"another service name conflicts", true, other(func(op *registrar.MintOp) { op.Spec.ServiceName = "otel2" }), registrar.MintSpecConflict},
		{"another reload conflicts", true, other(func(op *registrar.MintOp) { op.Spec.Reload = "restart" }), registrar.MintSpecConflict},
		{"another host and spec collide", true, other(func(op *registrar.MintOp) { op.Host = "web2"; op.Spec.Reload = "restart" }), registrar.MintCollision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openBackend(t, "", embedded.Options{})
			var prior registrar.Material
			if tt.prior {
				_, prior = mint(t, b, baseOp())
			}
			before, _ := binding(t, b, regID)

			got, m, err := b.Mint(context.Background(), tt.op)
			if err != nil {
				t.Fatalf("Mint: %v", err)
			}
			if got != tt.want {
				t.Fatalf("status: got %d, want %d", got, tt.want)
			}
			after, ok := binding(t, b, regID)
			if !ok {
				t.Fatalf("binding after %s: got none, want one", tt.name)
			}
			switch got {
			case registrar.MintCreated, registrar.MintReissued:
				if m.RoleID != after.RoleID || m.WrappedSecretID == "" {
					t.Errorf("material: got role %q secret empty=%t, want role %q and a secret", m.RoleID, m.WrappedSecretID == "", after.RoleID)
				}
				if !verify(t, b, regID, m.WrappedSecretID, tt.op.Now) {
					t.Errorf("the issued secret: got invalid, want valid")
				}
			default:
				if m != (registrar.Material{}) {
					t.Errorf("material: got %v, want the zero value", m)
				}
				if after != before {
					t.Errorf("binding: got %+v, want it unchanged %+v", after, before)
				}
				if !verify(t, b, regID, prior.WrappedSecretID, tt.op.Now) {
					t.Errorf("the prior secret: got invalid, want still valid")
				}
			}
		})
	}
}

func TestRemintKeepsRoleIDAndReplacesSecret(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	_, first := mint(t, b, baseOp())
	op := baseOp()
	op.Now = t0.Add(time.Hour)
	op.WrapTTL = time.Minute
	st, second := mint(t, b, op)

	if st != registrar.MintReissued {
		t.Fatalf("status: got %d, want MintReissued", st)
	}
	if second.RoleID != first.RoleID {
		t.Errorf("role id: got %q, want the first mint's %q", second.RoleID, first.RoleID)
	}
	if second.WrappedSecretID == first.WrappedSecretID {
		t.Errorf("wrapped secret id: got the first mint's again, want a fresh one")
	}
	if verify(t, b, regID, first.WrappedSecretID, op.Now) {
		t.Errorf("the first secret after the remint: got valid, want invalid")
	}
	if !verify(t, b, regID, second.WrappedSecretID, op.Now) {
		t.Errorf("the second secret: got invalid, want valid")
	}
	bnd, _ := binding(t, b, regID)
	if !bnd.CreatedAt.Equal(t0) || !bnd.IssuedAt.Equal(op.Now) || !bnd.ExpiresAt.Equal(op.Now.Add(time.Minute)) {
		t.Errorf("times: got created %s issued %s expires %s, want %s %s %s",
			bnd.CreatedAt, bnd.IssuedAt, bnd.ExpiresAt, t0, op.Now, op.Now.Add(time.Minute))
	}
}

func TestExpiresAtIsNowPlusTTLInUTCMilliseconds(t *testing.T) {
	paris := time.FixedZone("CEST", 2*3600)
	tests := []struct {
		name string
		now  time.Time
		ttl  time.Duration
		want time.Time
	}{
		{"one second", t0, time.Second, t0.Add(time.Second)},
		{"one day", t0, 24 * time.Hour, t0.Add(24 * time.Hour)},
		{"sub-millisecond now is truncated", t0.Add(999 * time.Microsecond), time.Second, t0.Add(time.Second)},
		{"a zoned now is answered in UTC", t0.In(paris), time.Minute, t0.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openBackend(t, "", embedded.Options{})
			op := baseOp()
			op.Now, op.WrapTTL = tt.now, tt.ttl
			_, m := mint(t, b, op)
			if !m.ExpiresAt.Equal(tt.want) || m.ExpiresAt.Location() != time.UTC {
				t.Errorf("expires_at: got %s, want %s", m.ExpiresAt, tt.want)
			}
		})
	}
}

func TestVerifySecretChecksHashAndExpiry(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	_, m := mint(t, b, baseOp())
	exp := t0.Add(ttl)
	tests := []struct {
		name   string
		id     string
		secret string
		now    time.Time
		want   bool
	}{
		{"the issued secret before expiry", regID, m.WrappedSecretID, t0, true},
		{"the issued secret just before expiry", regID, m.WrappedSecretID, exp.Add(-time.Nanosecond), true},
		{"the issued secret at expiry", regID, m.WrappedSecretID, exp, false},
		{"the issued secret after expiry", regID, m.WrappedSecretID, exp.Add(time.Hour), false},
		{"another secret", regID, m.WrappedSecretID + "x", t0, false},
		{"an empty secret", regID, "", t0, false},
		{"an unknown registration id", "web9-collector", m.WrappedSecretID, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := verify(t, b, tt.id, tt.secret, tt.now); got != tt.want {
				t.Errorf("VerifySecret: got %t, want %t", got, tt.want)
			}
		})
	}
	// Verification does not consume: the secret still verifies.
	if !verify(t, b, regID, m.WrappedSecretID, t0) {
		t.Errorf("after verifying: got invalid, want still valid (verification never consumes)")
	}
}

// TestDeregisterKeepsOrRemovesTheStoredIdentity checks what the contract
// suite (contract_test.go) cannot see: the stored binding and the prior
// secret after each status of a deregister of a bound id.
func TestDeregisterKeepsOrRemovesTheStoredIdentity(t *testing.T) {
	tests := []struct {
		name      string
		host      string
		want      registrar.DeregisterStatus
		wantBound bool
	}{
		{"another host is a mismatch", "web2", registrar.DeregisterHostMismatch, true},
		{"the bound host removes", host, registrar.DeregisterRemoved, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openBackend(t, "", embedded.Options{})
			_, m := mint(t, b, baseOp())
			before, _ := binding(t, b, regID)
			got, err := b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: regID, Host: tt.host})
			if err != nil {
				t.Fatalf("Deregister: %v", err)
			}
			if got != tt.want {
				t.Fatalf("status: got %d, want %d", got, tt.want)
			}
			after, bound := binding(t, b, regID)
			if bound != tt.wantBound {
				t.Fatalf("bound after: got %t, want %t", bound, tt.wantBound)
			}
			if bound && after != before {
				t.Errorf("binding: got %+v, want it unchanged %+v", after, before)
			}
			if verify(t, b, regID, m.WrappedSecretID, t0) != bound {
				t.Errorf("the prior secret: got valid=%t, want %t", !bound, bound)
			}
		})
	}
}

func TestBindingSurvivesCloseAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	b, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, m := mint(t, b, baseOp())
	want, _ := binding(t, b, regID)
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	b = openBackend(t, dir, embedded.Options{})
	got, ok := binding(t, b, regID)
	if !ok || got != want {
		t.Fatalf("after reopen: got %+v (bound %t), want %+v", got, ok, want)
	}
	if !verify(t, b, regID, m.WrappedSecretID, t0) {
		t.Errorf("the secret after reopen: got invalid, want valid")
	}
	if st, _ := mint(t, b, baseOp()); st != registrar.MintReissued {
		t.Errorf("remint after reopen: got %d, want MintReissued", st)
	}
}

func TestSecondOpenOfTheSameDirFailsFast(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	start := time.Now()
	second, err := embedded.Open(dir, embedded.Options{OpenTimeout: time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatalf("second Open: got success, want ErrLocked")
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("second Open took %s, want it to fail fast", elapsed)
	}
	if !errors.Is(err, embedded.ErrLocked) {
		t.Errorf("error: got %v, want ErrLocked", err)
	}
	if path := filepath.Join(dir, embedded.FileName); !strings.Contains(err.Error(), path) {
		t.Errorf("error: got %q, want it to name %s", err, path)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	openBackend(t, dir, embedded.Options{OpenTimeout: time.Millisecond})
}

func TestCorruptRecordIsAnErrorNamingTheKey(t *testing.T) {
	tests := []struct {
		name   string
		bucket string
		value  []byte // nil deletes the key
		// deregisterErr: Deregister decodes only the binding.
		deregisterErr bool
		// verifyErr: VerifySecret decodes only the identity.
		verifyErr bool
	}{
		{"garbage binding", "bindings", []byte("\x00not json"), true, false},
		{"binding of an unknown version", "bindings", []byte(`{"v":2,"host":"web1","role_id":"r"}`), true, false},
		{"binding without a host", "bindings", []byte(`{"v":1,"role_id":"r"}`), true, false},
		{"garbage identity", "identities", []byte("{"), false, true},
		{"identity with a bad hash", "identities", []byte(`{"v":1,"role_id":"r","secret_sha256":"zz"}`), false, true},
		{"identity missing", "identities", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			b, err := embedded.Open(dir, embedded.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			_, m := mint(t, b, baseOp())
			b.Close()
			writeRaw(t, filepath.Join(dir, embedded.FileName), tt.bucket, regID, tt.value)
			b = openBackend(t, dir, embedded.Options{})

			check := func(call string, err error, wantErr bool) {
				t.Helper()
				if !wantErr {
					if err != nil {
						t.Errorf("%s: got %v, want no error", call, err)
					}
					return
				}
				var ce *embedded.CorruptRecordError
				if !errors.As(err, &ce) || ce.Bucket != tt.bucket || ce.Key != regID {
					t.Errorf("%s: got %v, want a *CorruptRecordError for %s/%s", call, err, tt.bucket, regID)
				}
				if err != nil && !strings.Contains(err.Error(), regID) {
					t.Errorf("%s: got %q, want it to name the key %s", call, err, regID)
				}
			}
			before, _ := os.ReadFile(filepath.Join(dir, embedded.FileName))
			_, _, err = b.Mint(context.Background(), baseOp())
			check("Mint", err, true)
			_, _, err = b.Binding(regID)
			check("Binding", err, true)
			_, err = b.VerifySecret(regID, m.WrappedSecretID, t0)
			check("VerifySecret", err, tt.verifyErr)
			if after, _ := os.ReadFile(filepath.Join(dir, embedded.FileName)); !bytes.Equal(before, after) {
				t.Errorf("the database changed after failed calls, want it untouched")
			}
			_, err = b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: regID, Host: host})
			check("Deregister", err, tt.deregisterErr)
		})
	}
}

// writeRaw sets (or, for a nil value, deletes) bucket/key with bbolt
// directly, bypassing the backend.
func writeRaw(t *testing.T, path, bucket, key string, value []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return fmt.Errorf("no bucket %s", bucket)
		}
		if value == nil {
			return bk.Delete([]byte(key))
		}
		return bk.Put([]byte(key), value)
	})
	if err != nil {
		t.Fatalf("writing %s/%s: %v", bucket, key, err)
	}
}

func TestOpenSetsAndChecksPermissions(t *testing.T) {
	t.Run("a created dir is 0700 and the file 0600", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "state")
		openBackend(t, dir, embedded.Options{})
		assertPerm(t, dir, 0o700)
		assertPerm(t, filepath.Join(dir, embedded.FileName), 0o600)
	})
	t.Run("an existing file is restated to 0600", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		b := openBackend(t, dir, embedded.Options{})
		b.Close()
		path := filepath.Join(dir, embedded.FileName)
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		openBackend(t, dir, embedded.Options{})
		assertPerm(t, path, 0o600)
	})

	refused := []struct {
		name    string
		setup   func(t *testing.T, base string) string // returns the dir to open
		refuses string                                 // the path refused, under the dir
		problem string                                 // the words an operator reads
	}{
		{"a symlinked state dir", func(t *testing.T, base string) string {
			real := filepath.Join(base, "real")
			mustDo(t, os.Mkdir(real, 0o700))
			link := filepath.Join(base, "link")
			mustDo(t, os.Symlink(real, link))
			return link
		}, "", "is a symlink"},
		{"a group-writable state dir", func(t *testing.T, base string) string {
			dir := filepath.Join(base, "state")
			mustDo(t, os.Mkdir(dir, 0o700))
			mustDo(t, os.Chmod(dir, 0o770))
			return dir
		}, "", "has mode 0770 (group- or world-writable; want 0700)"},
		{"a state dir that is a file", func(t *testing.T, base string) string {
			path := filepath.Join(base, "state")
			mustDo(t, os.WriteFile(path, nil, 0o600))
			return path
		}, "", "is not a directory"},
		{"a symlinked database file", func(t *testing.T, base string) string {
			dir := filepath.Join(base, "state")
			mustDo(t, os.Mkdir(dir, 0o700))
			target := filepath.Join(base, "elsewhere.db")
			mustDo(t, os.Symlink(target, filepath.Join(dir, embedded.FileName)))
			return dir
		}, embedded.FileName, "is a symlink"},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			dir := tt.setup(t, t.TempDir())
			b, err := embedded.Open(dir, embedded.Options{})
			if err == nil {
				b.Close()
				t.Fatalf("Open: got success, want ErrUnsafeState")
			}
			if !errors.Is(err, embedded.ErrUnsafeState) {
				t.Errorf("Open: got %v, want ErrUnsafeState", err)
			}
			if want := "embedded: refusing " + filepath.Join(dir, tt.refuses) + ": " + tt.problem; err.Error() != want {
				t.Errorf("Open: got %q, want %q", err, want)
			}
		})
	}
}

func assertPerm(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("mode of %s: got %#o, want %#o", path, got, want)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var (
	roleIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	secretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
)

func TestMaterialIsRandomAndWellFormed(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	const n = 100
	secrets := map[string]bool{}
	roles := map[string]bool{}
	for i := range n {
		op := baseOp()
		op.RegistrationID = fmt.Sprintf("web%d-collector", i%10) // ten bindings, ten mints each
		_, m := mint(t, b, op)
		if secrets[m.WrappedSecretID] {
			t.Fatalf("mint %d: got a wrapped secret id already issued", i)
		}
		secrets[m.WrappedSecretID] = true
		roles[m.RoleID] = true
		if !roleIDPattern.MatchString(m.RoleID) {
			t.Errorf("role id: got %q, want a version 4 UUID", m.RoleID)
		}
		if !secretPattern.MatchString(m.WrappedSecretID) {
			t.Errorf("wrapped secret id: got %d characters, want 43 of base64url", len(m.WrappedSecretID))
		}
	}
	if len(roles) != 10 {
		t.Errorf("role ids: got %d distinct, want 10 (one per binding)", len(roles))
	}
}

var errNoEntropy = errors.New("no entropy")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errNoEntropy }

func TestFailingRandCreatesNothing(t *testing.T) {
	tests := []struct {
		name  string
		bytes int // readable before the reader fails
	}{
		{"no bytes: the role id fails", 0},
		{"a role id but no secret", 16},
		{"half a secret", 16 + 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := io.MultiReader(bytes.NewReader(make([]byte, tt.bytes)), failingReader{})
			b := openBackend(t, "", embedded.Options{Rand: r})
			st, m, err := b.Mint(context.Background(), baseOp())
			if !errors.Is(err, errNoEntropy) {
				t.Errorf("Mint: got %d, %v, want the reader's error", st, err)
			}
			if m != (registrar.Material{}) {
				t.Errorf("material: got %v, want the zero value", m)
			}
			if _, ok := binding(t, b, regID); ok {
				t.Errorf("binding: got one, want none")
			}
		})
	}
}

func TestFailingRandOnRemintKeepsThePreviousSecret(t *testing.T) {
	r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte{7}, 16+32)), failingReader{})
	b := openBackend(t, "", embedded.Options{Rand: r})
	_, first := mint(t, b, baseOp())
	if _, _, err := b.Mint(context.Background(), baseOp()); !errors.Is(err, errNoEntropy) {
		t.Fatalf("remint: got %v, want the reader's error", err)
	}
	if !verify(t, b, regID, first.WrappedSecretID, t0) {
		t.Errorf("the first secret after a failed remint: got invalid, want still valid")
	}
}

func TestCancelledContextTouchesNothing(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := b.Mint(ctx, baseOp()); !errors.Is(err, context.Canceled) {
		t.Errorf("Mint: got %v, want context.Canceled", err)
	}
	if _, ok := binding(t, b, regID); ok {
		t.Errorf("binding after a cancelled mint: got one, want none")
	}
	mint(t, b, baseOp())
	if _, err := b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: regID, Host: host}); !errors.Is(err, context.Canceled) {
		t.Errorf("Deregister: got %v, want context.Canceled", err)
	}
	if _, ok := binding(t, b, regID); !ok {
		t.Errorf("binding after a cancelled deregister: got none, want it kept")
	}
}

func TestClosedBackendAnswersErrClosed(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	_, _, err := b.Mint(context.Background(), baseOp())
	assertIs(t, "Mint", err, embedded.ErrClosed)
	_, err = b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: regID, Host: host})
	assertIs(t, "Deregister", err, embedded.ErrClosed)
	_, _, err = b.Binding(regID)
	assertIs(t, "Binding", err, embedded.ErrClosed)
	_, err = b.VerifySecret(regID, "x", t0)
	assertIs(t, "VerifySecret", err, embedded.ErrClosed)
}

func TestInvalidOpsAreRefused(t *testing.T) {
	b := openBackend(t, "", embedded.Options{})
	tests := []struct {
		name string
		op   func(*registrar.MintOp)
	}{
		{"an empty registration id", func(op *registrar.MintOp) { op.RegistrationID = "" }},
		{"an empty host", func(op *registrar.MintOp) { op.Host = "" }},
		{"a zero wrap TTL", func(op *registrar.MintOp) { op.WrapTTL = 0 }},
		{"a zero now", func(op *registrar.MintOp) { op.Now = time.Time{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := baseOp()
			tt.op(&op)
			_, _, err := b.Mint(context.Background(), op)
			assertIs(t, "Mint", err, embedded.ErrInvalidOp)
		})
	}
	_, err := b.Deregister(context.Background(), registrar.DeregisterOp{Host: host})
	assertIs(t, "Deregister", err, embedded.ErrInvalidOp)
}

func assertIs(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", call, err, want)
	}
}
