package openbao_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
)

// childToken creates a token as the root: renewable or not, with ttl, and
// holding the root policy (so that it can mint).
func childToken(t *testing.T, root *api.Client, ttl string, renewable bool) string {
	t.Helper()
	s, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"root"}, TTL: ttl, Renewable: &renewable})
	if err != nil {
		t.Fatal(err)
	}
	return s.Auth.ClientToken
}

func tokenTTL(t *testing.T, root *api.Client, tok string) time.Duration {
	t.Helper()
	s, err := root.Auth().Token().Lookup(tok)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.Data["ttl"].(json.Number).Int64()
	return time.Duration(n) * time.Second
}

func tokenBackend(t *testing.T, e *env, opts openbao.Options) *openbao.Backend {
	t.Helper()
	opts.Address, opts.KVPrefix, opts.RequestTimeout = e.srv.Addr, testPrefix, 10*time.Second
	b, err := openbao.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// A renewable token with less than RenewFraction of its TTL left is renewed
// on the check, by its creation TTL; one with more is left alone. The
// token's creation TTL is 1 h; the root renews it down to 10 s first, so
// the check finds it nearly lapsed without the test waiting.
func TestARenewableTokenIsRenewedBeforeItLapses(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	tok := childToken(t, e.root, "1h", true)
	b := tokenBackend(t, e, openbao.Options{Token: tok})

	if err := b.CheckToken(ctx, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if got := tokenTTL(t, e.root, tok); got < 50*time.Minute {
		t.Fatalf("a fresh 1 h token's ttl is %v after the check", got)
	}
	if _, err := e.root.Auth().Token().Renew(tok, 10); err != nil {
		t.Fatal(err)
	}
	if got := tokenTTL(t, e.root, tok); got > 10*time.Second {
		t.Fatalf("the root's renewal left ttl %v, want at most 10 s", got)
	}
	now := time.Now()
	if err := b.CheckToken(ctx, now, true); err != nil {
		t.Fatal(err)
	}
	if got := tokenTTL(t, e.root, tok); got < 50*time.Minute {
		t.Errorf("after the check the token's ttl is %v, want renewed to about 1 h", got)
	}
	st := b.TokenStats()
	if !st.Known || !st.Renewable || st.Expiry.Before(now.Add(50*time.Minute)) {
		t.Errorf("TokenStats = %+v, want known, renewable, expiring in about 1 h", st)
	}
}

// A token that cannot be renewed is logged once with its expiry, however
// often it is checked; the expiry is exported all the same.
func TestANonRenewableTokenIsLoggedOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	tok := childToken(t, e.root, "2h", false)
	logs := &logBuffer{}
	b := tokenBackend(t, e, openbao.Options{Token: tok, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for range 3 {
		if err := b.CheckToken(ctx, time.Now(), true); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "not renewable"); n != 1 {
		t.Errorf("the non-renewable token was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "expiry=") {
		t.Errorf("the log line does not carry the expiry:\n%s", logs.String())
	}
	if st := b.TokenStats(); !st.Known || st.Renewable || st.Expiry.Before(time.Now().Add(time.Hour)) {
		t.Errorf("TokenStats = %+v, want known, not renewable, expiring in about 2 h", st)
	}
	if strings.Contains(logs.String(), tok) {
		t.Error("the log contains the token")
	}
}

// A rotated token file is picked up by the check (a new file renamed over
// the old) and by RereadToken (rewritten in place); the previous token can
// then be revoked without a failing mint. A re-read token that does not
// look up is refused and the backend keeps its token.
func TestARotatedTokenFileIsPickedUpOnTheCheckAndOnRereadToken(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "openbao-token")
	write := func(tok string, rename bool) {
		t.Helper()
		target := file
		if rename {
			target = file + ".new"
		}
		if err := os.WriteFile(target, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if rename {
			if err := os.Rename(target, file); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() (string, error) {
		raw, err := os.ReadFile(file)
		return strings.TrimSpace(string(raw)), err
	}
	a, bTok, c := childToken(t, e.root, "1h", true), childToken(t, e.root, "1h", true), childToken(t, e.root, "1h", true)
	write(a, false)
	b := tokenBackend(t, e, openbao.Options{Token: a, ReadToken: read, TokenFile: file})
	mintWorks := func(id string) {
		t.Helper()
		if _, _, err := b.Mint(ctx, mintOp(id, "h1", "review")); err != nil {
			t.Errorf("mint %s: %v", id, err)
		}
	}
	mintWorks("h1-review-001")

	write(bTok, true)
	if err := b.CheckToken(ctx, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if err := e.root.Auth().Token().RevokeTree(a); err != nil {
		t.Fatal(err)
	}
	mintWorks("h1-review-002")

	write(c, false)
	if err := b.RereadToken(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.root.Auth().Token().RevokeTree(bTok); err != nil {
		t.Fatal(err)
	}
	mintWorks("h1-review-003")

	write("hvs.not-a-real-token", false)
	if err := b.RereadToken(ctx); err == nil {
		t.Error("RereadToken accepted a token the server does not know")
	}
	mintWorks("h1-review-004")
}
