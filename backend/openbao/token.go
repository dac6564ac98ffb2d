package openbao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// RenewFraction is the share of a renewable token's TTL left when the
// backend renews it: at its tick, a token with at most RenewFraction ×
// creation TTL remaining is renewed (auth/token/renew-self, increment the
// creation TTL, or the period of a periodic token). A 24 h periodic token
// is renewed once it has 12 h or less, so it never comes within 12 h of
// expiry while the server answers.
const RenewFraction = 0.5

// TokenCheckInterval is the least time between two token lookups
// (auth/token/lookup-self) on the tick: the expiry is known at start, after
// each renewal and re-read, and refreshed at most this often otherwise.
const TokenCheckInterval = time.Minute

// TokenStats is what the backend knows of its token, for the
// registrar_openbao_token_expiry_timestamp_seconds gauge.
type TokenStats struct {
	// Expiry is when the token lapses unless renewed; zero when it never
	// expires (a root token) or is not known yet (no lookup succeeded).
	Expiry time.Time
	// Known reports that a lookup succeeded.
	Known bool
	// Renewable is the token's renewable flag as last looked up.
	Renewable bool
}

// tokenState is the token's life as last looked up; guarded by tokMu.
type tokenState struct {
	stats       TokenStats
	creationTTL time.Duration
	lastLookup  time.Time
	fileID      fileID // the token file's identity at the last read
	warnedFixed bool   // the non-renewable token was logged
}

// fileID tells a changed file from the same one: device, inode, size and
// modification time.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

func statFile(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return id, nil
}

// TokenStats returns what the backend knows of its token. Safe for
// concurrent use.
func (b *Backend) TokenStats() TokenStats {
	b.tokMu.Lock()
	defer b.tokMu.Unlock()
	return b.tok.stats
}

// RereadToken reads the token again through Options.ReadToken (the
// daemon's is config.OpenBao.ReadToken: openbao.token_file, else the
// environment) and, if it changed, checks the new one with a lookup-self
// before using it. On any error the backend keeps the token it has. The
// daemon calls it on SIGHUP, and CheckToken calls it when the token file
// changed. Without Options.ReadToken it does nothing.
func (b *Backend) RereadToken(ctx context.Context) error {
	if b.readToken == nil {
		return nil
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.rotMu.Lock()
	defer b.rotMu.Unlock()
	return b.rereadLocked(ctx)
}

func (b *Backend) rereadLocked(ctx context.Context) error {
	var id fileID
	if b.tokenFile != "" {
		id, _ = statFile(b.tokenFile)
	}
	tok, err := b.readToken()
	if err != nil {
		return fmt.Errorf("openbao: re-reading the token: %w", err)
	}
	if tok == b.client.Token() {
		b.tokMu.Lock()
		b.tok.fileID = id
		b.tokMu.Unlock()
		return nil
	}
	info, err := b.lookupSelf(ctx, tok)
	if err != nil {
		return fmt.Errorf("openbao: the re-read token does not look up, keeping the previous one: %w", err)
	}
	b.client.SetToken(tok)
	b.tokMu.Lock()
	b.tok.fileID = id
	b.tok.warnedFixed = false
	b.tokMu.Unlock()
	b.noteLookup(info)
	b.log.Info("openbao token re-read", "expiry", b.TokenStats().Expiry, "renewable", info.renewable)
	return nil
}

// CheckToken is the tick's token work: re-read the token file if it
// changed, look the token up (at most every TokenCheckInterval, or when
// force), renew a renewable token with at most RenewFraction of its TTL
// left, and log a token that cannot be renewed once, with its expiry.
func (b *Backend) CheckToken(ctx context.Context, now time.Time, force bool) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.rotMu.Lock()
	defer b.rotMu.Unlock()
	var errs []error
	if b.tokenFile != "" && b.readToken != nil {
		id, err := statFile(b.tokenFile)
		b.tokMu.Lock()
		changed := err == nil && id != b.tok.fileID
		b.tokMu.Unlock()
		if changed {
			if err := b.rereadLocked(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.tokMu.Lock()
	due := force || now.Sub(b.tok.lastLookup) >= TokenCheckInterval ||
		(b.tok.stats.Renewable && !b.tok.stats.Expiry.IsZero() &&
			b.tok.stats.Expiry.Sub(now) <= time.Duration(float64(b.tok.creationTTL)*RenewFraction))
	if due {
		// A failing lookup (a token without lookup-self, a server that
		// is down) is retried a TokenCheckInterval later, not every tick.
		b.tok.lastLookup = now
	}
	b.tokMu.Unlock()
	if !due {
		return errors.Join(errs...)
	}
	info, err := b.lookupSelf(ctx, "")
	if err != nil {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	b.noteLookup(info)
	switch {
	case info.ttl == 0:
		// Never expires (a root token): nothing to renew.
	case info.renewable && info.ttl <= time.Duration(float64(info.creationTTL)*RenewFraction):
		if err := b.renewSelf(ctx, info.creationTTL); err != nil {
			errs = append(errs, err)
		} else if info, err = b.lookupSelf(ctx, ""); err == nil {
			b.noteLookup(info)
		}
	case !info.renewable:
		b.tokMu.Lock()
		warn := !b.tok.warnedFixed
		b.tok.warnedFixed = true
		exp := b.tok.stats.Expiry
		b.tokMu.Unlock()
		if warn {
			b.log.Warn("openbao token is not renewable: replace openbao.token_file before it expires", "expiry", exp.UTC().Format(time.RFC3339))
		}
	}
	return errors.Join(errs...)
}

type tokenInfo struct {
	ttl, creationTTL time.Duration
	renewable        bool
	at               time.Time
}

// lookupSelf looks up tok ("" means the backend's own).
func (b *Backend) lookupSelf(ctx context.Context, tok string) (tokenInfo, error) {
	var info tokenInfo
	err := b.tel.request(ctx, OpTokenLookup, b.timeout, func(ctx context.Context) error {
		c := b.client
		if tok != "" {
			var err error
			if c, err = b.client.Clone(); err != nil {
				return err
			}
			c.SetToken(tok)
		}
		s, err := c.Logical().ReadWithContext(ctx, "auth/token/lookup-self")
		if err != nil {
			return err
		}
		if s == nil || s.Data == nil {
			return b.tel.badResponse(ctx, OpTokenLookup, errors.New("lookup-self answered no data"))
		}
		secs := func(k string) time.Duration {
			num, _ := s.Data[k].(json.Number)
			n, _ := num.Int64()
			return time.Duration(n) * time.Second
		}
		info.ttl, info.creationTTL = secs("ttl"), secs("creation_ttl")
		if p := secs("period"); p > 0 {
			info.creationTTL = p
		}
		info.renewable, _ = s.Data["renewable"].(bool)
		info.at = time.Now()
		return nil
	})
	return info, err
}

func (b *Backend) renewSelf(ctx context.Context, increment time.Duration) error {
	return b.tel.request(ctx, OpTokenRenew, b.timeout, func(ctx context.Context) error {
		_, err := b.client.Logical().WriteWithContext(ctx, "auth/token/renew-self", map[string]any{"increment": int64(increment / time.Second)})
		return err
	})
}

func (b *Backend) noteLookup(info tokenInfo) {
	b.tokMu.Lock()
	defer b.tokMu.Unlock()
	b.tok.lastLookup = info.at
	b.tok.creationTTL = info.creationTTL
	b.tok.stats = TokenStats{Known: true, Renewable: info.renewable}
	if info.ttl > 0 {
		b.tok.stats.Expiry = info.at.Add(info.ttl)
	}
}
