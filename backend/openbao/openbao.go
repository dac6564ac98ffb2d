package openbao

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openbao/openbao/api/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// RolePrefix starts the name of every AppRole role this backend manages:
// bootroot-service-<registration_id>. (Up to 0.9.0 the backend also wrote a
// policy of that name per registration; it writes none now.)
const RolePrefix = "bootroot-service-"

// DefaultRequestTimeout bounds each request when Options.RequestTimeout is
// not set.
const DefaultRequestTimeout = 5 * time.Second

// DefaultMaxInFlight is Options.MaxInFlight's default (openbao.max_in_flight):
// well below the listeners' connection caps (128 each by default), so a
// hanging server holds at most this many callers, goroutines and
// connections.
const DefaultMaxInFlight = 16

// DefaultSlotWait is how long a call waits for one of the MaxInFlight slots
// when Options.SlotWait is not set. It is short on purpose: with every slot
// taken the server is slow or hanging, and the caller is better answered
// BackendUnavailable now than after openbao.request_timeout_ms.
const DefaultSlotWait = 100 * time.Millisecond

// maxClaimAttempts bounds the read → claim loop of one mint: a claim that
// loses a race reads the winner, which exists unless it was deregistered
// in between, which in turn needs another daemon deregistering and
// re-minting the same id at once.
const maxClaimAttempts = 3

var _ registrar.Backend = (*Backend)(nil)

// Options configures New. Address and Token are required; the rest have
// the [openbao] table's defaults.
type Options struct {
	// Address is the server's URL (openbao.address).
	Address string
	// RootCAs verifies the server's certificate; nil means the system
	// roots.
	RootCAs *x509.CertPool
	// Token authenticates every request. It is never logged and never part
	// of an error.
	Token string
	// KVMount, KVPrefix and AppRoleMount are openbao.kv_mount,
	// openbao.kv_prefix and openbao.approle_mount; "" means "secret",
	// "registrar-otel" and "approle".
	KVMount, KVPrefix, AppRoleMount string
	// RequestTimeout bounds each request; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SecretIDTTL is each secret id's lifetime from its creation; zero
	// means one hour. It is rounded down to whole seconds.
	SecretIDTTL time.Duration
	// SecretIDNumUses is how many logins a secret id allows; zero means 1.
	SecretIDNumUses uint32
	// MaxInFlight bounds the calls (Mint, Deregister) talking to the
	// server at once (openbao.max_in_flight); each makes its requests one
	// after the other, so it also bounds the requests in flight. Zero means
	// DefaultMaxInFlight.
	MaxInFlight uint32
	// SlotWait bounds how long a call waits for a free slot before failing
	// with a *RequestError of kind KindSaturated, changing nothing; zero
	// means DefaultSlotWait.
	SlotWait time.Duration
	// Logger receives a warning for each failed request, with its cause;
	// nil discards. No message carries the token or a secret.
	Logger *slog.Logger
	// TracerProvider traces every request; nil means no-op.
	TracerProvider trace.TracerProvider
	// ReadToken, when set, reads the token again for RereadToken and for
	// CheckToken when TokenFile changed (the daemon's reads
	// openbao.token_file or the environment, as at start).
	ReadToken func() (string, error)
	// TokenFile is the file ReadToken reads, if any: CheckToken re-reads
	// the token when its identity (device, inode, size, mtime) changes.
	TokenFile string
	// Observer receives every request's measurements (the daemon's is
	// telemetry.NewOpenBaoObserver); nil means none.
	Observer Observer
}

// Backend is the openbao registrar.Backend. It is safe for concurrent use.
type Backend struct {
	client    *api.Client
	transport *http.Transport // nil if the client's is not an *http.Transport
	kv        *api.KVv2
	kvMount   string
	prefix    string
	approle   string
	timeout   time.Duration
	ttl       time.Duration
	uses      uint32
	log       *slog.Logger
	tel       *instruments
	slots     chan struct{} // a token per call in flight; cap MaxInFlight
	slotWait  time.Duration
	ids       idLocks // one mint or deregister of an id at a time

	readToken func() (string, error)
	tokenFile string
	rotMu     sync.Mutex // serialises re-reads, lookups and renewals
	tokMu     sync.Mutex // guards tok
	tok       tokenState

	mu     sync.RWMutex // held shared by operations, exclusively by Close
	closed bool
}

// New returns a backend for the server at opts.Address. It makes no
// request: a server that is down fails the first mint, not the daemon's
// start.
func New(opts Options) (*Backend, error) {
	if opts.Address == "" {
		return nil, errors.New("openbao: New: empty address (openbao.address)")
	}
	if opts.Token == "" {
		return nil, errors.New("openbao: New: empty token")
	}
	u, err := url.Parse(opts.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openbao: New: address %q is not an http:// or https:// URL", opts.Address)
	}
	b := &Backend{
		kvMount: orDefault(opts.KVMount, "secret"),
		prefix:  orDefault(opts.KVPrefix, "registrar-otel"),
		approle: orDefault(opts.AppRoleMount, "approle"),
		timeout: opts.RequestTimeout,
		ttl:     opts.SecretIDTTL,
		uses:    opts.SecretIDNumUses,
		log:     opts.Logger,
	}
	if b.timeout <= 0 {
		b.timeout = DefaultRequestTimeout
	}
	if b.ttl <= 0 {
		b.ttl = time.Hour
	}
	if b.uses == 0 {
		b.uses = 1
	}
	maxInFlight := opts.MaxInFlight
	if maxInFlight == 0 {
		maxInFlight = DefaultMaxInFlight
	}
	b.slots = make(chan struct{}, maxInFlight)
	b.slotWait = opts.SlotWait
	if b.slotWait <= 0 {
		b.slotWait = DefaultSlotWait
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.log = b.log.With("openbao", u.Redacted())

	// NewConfig, not DefaultConfig: nothing is read from BAO_* / VAULT_*
	// variables (an inherited BAO_SKIP_VERIFY must not turn verification
	// off). No client-side retries: every step converges when the caller
	// retries, and a retried write would blur what the metrics count.
	cfg := api.NewConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("openbao: New: %w", cfg.Error)
	}
	cfg.Address = opts.Address
	cfg.MaxRetries = 0
	cfg.Timeout = b.timeout
	if t, ok := cfg.HttpClient.Transport.(*http.Transport); ok {
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		t.TLSClientConfig.RootCAs = opts.RootCAs
		b.transport = t
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("openbao: New: %w", err)
	}
	client.SetToken(opts.Token)
	b.client = client
	b.readToken, b.tokenFile = opts.ReadToken, opts.TokenFile
	if b.tokenFile != "" {
		b.tok.fileID, _ = statFile(b.tokenFile)
	}
	b.kv = client.KVv2(b.kvMount)
	b.tel = newInstruments(opts.TracerProvider, opts.Observer, u)
	return b, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Close stops the backend: every later call returns ErrClosed. Calls in
// flight finish first. Idle connections are closed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		if b.transport != nil {
			b.transport.CloseIdleConnections()
		}
	}
	return nil
}

// RoleName returns the AppRole role's name for a registration id: bootroot-service-<registration_id>.
func RoleName(registrationID string) string { return RolePrefix + registrationID }

// BindingPath returns the binding's path inside the KV mount:
// <kv_prefix>/bindings/<registration_id>.
func (b *Backend) BindingPath(registrationID string) string {
	return path.Join(b.prefix, "bindings", registrationID)
}

// TokenPolicy returns the policy the backend's token must hold, for its
// mounts, prefix and secret id settings: see the package function
// TokenPolicy.
func (b *Backend) TokenPolicy() string {
	return TokenPolicy(b.kvMount, b.prefix, b.approle, b.ttl, b.uses)
}

func (b *Backend) enter() error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (b *Backend) leave() { b.mu.RUnlock() }

// acquire takes one of the MaxInFlight slots, waiting at most slotWait. A
// call that gets none fails before any request, as a *RequestError of kind
// KindSaturated on op (the request it could not make), counted like any
// failed request.
func (b *Backend) acquire(ctx context.Context, op Operation) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(b.slotWait)
	defer t.Stop()
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-t.C:
		return b.tel.saturated(ctx, op, fmt.Errorf("all %d slots (openbao.max_in_flight) busy for %s: the server is slow or hanging", cap(b.slots), b.slotWait))
	case <-ctx.Done():
		return b.tel.saturated(ctx, op, fmt.Errorf("waiting for a slot (openbao.max_in_flight): %w", ctx.Err()))
	}
}

func (b *Backend) release() { <-b.slots }

// binding is what a registration id is bound to, as stored in KV.
type binding struct {
	host      string
	spec      registrar.Spec
	state     string // stateClaimed or stateActive
	createdAt string
	// secretIDAccessor is the accessor of the last secret id issued for
	// the binding ("" before the first, and for bindings written before
	// this field existed): the next mint destroys that secret id.
	secretIDAccessor string
	version          int // the KV version read
}

const (
	bindingFormat = "1"
	stateClaimed  = "claimed"
	stateActive   = "active"
)

func (bd *binding) data() map[string]any {
	m := map[string]any{
		"v":            bindingFormat,
		"host":         bd.host,
		"component":    bd.spec.Component,
		"service_name": bd.spec.ServiceName,
		"reload":       bd.spec.Reload,
		"state":        bd.state,
		"created_at":   bd.createdAt,
	}
	if bd.secretIDAccessor != "" {
		m["secret_id_accessor"] = bd.secretIDAccessor
	}
	return m
}

func decodeBinding(p string, version int, data map[string]any) (*binding, error) {
	str := func(k string) (string, error) {
		v, ok := data[k].(string)
		if !ok {
			return "", fmt.Errorf("%w at %s (version %d): %q is missing or not a string", ErrCorrupt, p, version, k)
		}
		return v, nil
	}
	bd := &binding{version: version}
	var errs [7]error
	var v string
	v, errs[0] = str("v")
	bd.host, errs[1] = str("host")
	bd.spec.Component, errs[2] = str("component")
	bd.spec.ServiceName, errs[3] = str("service_name")
	bd.spec.Reload, errs[4] = str("reload")
	bd.state, errs[5] = str("state")
	bd.createdAt, errs[6] = str("created_at")
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	if acc, ok := data["secret_id_accessor"]; ok {
		if bd.secretIDAccessor, ok = acc.(string); !ok {
			return nil, fmt.Errorf("%w at %s (version %d): \"secret_id_accessor\" is not a string", ErrCorrupt, p, version)
		}
	}
	if v != bindingFormat {
		return nil, fmt.Errorf("%w at %s (version %d): format %q, want %q", ErrCorrupt, p, version, v, bindingFormat)
	}
	if bd.state != stateClaimed && bd.state != stateActive {
		return nil, fmt.Errorf("%w at %s (version %d): state %q", ErrCorrupt, p, version, bd.state)
	}
	if bd.host == "" {
		return nil, fmt.Errorf("%w at %s (version %d): empty host", ErrCorrupt, p, version)
	}
	return bd, nil
}

// readBinding returns the binding, or nil when there is none.
func (b *Backend) readBinding(ctx context.Context, id string) (*binding, error) {
	p := b.BindingPath(id)
	var bd *binding
	err := b.tel.request(ctx, OpBindingRead, b.timeout, func(ctx context.Context) error {
		s, err := b.kv.Get(ctx, p)
		if errors.Is(err, api.ErrSecretNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.VersionMetadata == nil {
			return b.tel.badResponse(ctx, OpBindingRead, fmt.Errorf("reading %s: no version metadata", p))
		}
		if s.Data == nil {
			// The current version is soft-deleted: the metadata survives,
			// so a claim with cas=0 would fail. Say what to do rather
			// than guess whether it is bound.
			return fmt.Errorf("%w at %s: version %d is deleted but its metadata remains; destroy it (kv metadata delete) or undelete it",
				ErrCorrupt, p, s.VersionMetadata.Version)
		}
		bd, err = decodeBinding(p, s.VersionMetadata.Version, s.Data)
		return err
	})
	return bd, err
}

// writeBinding writes bd with a compare-and-set on cas (0: only if
// absent). lost reports a compare-and-set that did not match.
func (b *Backend) writeBinding(ctx context.Context, op Operation, id string, bd *binding, cas int) (version int, lost bool, err error) {
	p := b.BindingPath(id)
	err = b.tel.request(ctx, op, b.timeout, func(ctx context.Context) error {
		s, err := b.kv.Put(ctx, p, bd.data(), api.WithCheckAndSet(cas))
		if isCASMismatch(err) {
			lost = true
			return nil
		}
		if err != nil {
			return err
		}
		if s.VersionMetadata == nil {
			return b.tel.badResponse(ctx, op, fmt.Errorf("writing %s: no version metadata in the answer", p))
		}
		version = s.VersionMetadata.Version
		return nil
	})
	return version, lost, err
}

// progress tracks the state-changing steps of one operation, so that a
// failure after any of them is reported as a *registrar.PartialError.
type progress struct {
	changed []string
}

func (p *progress) done(step string) { p.changed = append(p.changed, step) }

// fail wraps err: a *registrar.PartialError when a step already changed
// state, or when this step (named) may have been applied; else err as is.
func (p *progress) fail(step string, err error) error {
	changed := p.changed
	if re, ok := errors.AsType[*RequestError](err); step != "" && (!ok || !re.definitelyNotApplied()) {
		changed = append(changed[:len(changed):len(changed)], step+" (maybe)")
	}
	if len(changed) == 0 {
		return err
	}
	return &registrar.PartialError{Changed: changed, Err: err}
}

// Mint implements registrar.Backend; see the package documentation for the
// steps. Material is the zero value unless the status is MintCreated or
// MintReissued; its ExpiresAt is op.Now + op.WrapTTL (the server's wrapping
// lives at least that long).
func (b *Backend) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if err := checkMint(op); err != nil {
		return 0, registrar.Material{}, err
	}
	if err := b.enter(); err != nil {
		return 0, registrar.Material{}, err
	}
	defer b.leave()
	unlock, err := b.ids.lock(ctx, op.RegistrationID)
	if err != nil {
		err = b.tel.saturated(ctx, OpBindingRead, fmt.Errorf("waiting for another operation on %q to finish: %w", op.RegistrationID, err))
		b.logFailure(ctx, "mint", op.RegistrationID, err)
		return 0, registrar.Material{}, err
	}
	defer unlock()
	if err := b.acquire(ctx, OpBindingRead); err != nil {
		b.logFailure(ctx, "mint", op.RegistrationID, err)
		return 0, registrar.Material{}, err
	}
	defer b.release()
	status, mat, err := b.mint(ctx, op)
	if err != nil {
		b.logFailure(ctx, "mint", op.RegistrationID, err)
		return 0, registrar.Material{}, err
	}
	return status, mat, nil
}

func (b *Backend) mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	var (
		prog progress
		bd   *binding
		err  error
	)
	id := op.RegistrationID
	for attempt := 0; bd == nil; attempt++ {
		if attempt == maxClaimAttempts {
			return 0, registrar.Material{}, prog.fail("", fmt.Errorf("openbao: mint %q: the binding at %s kept changing while being claimed", id, b.BindingPath(id)))
		}
		if bd, err = b.readBinding(ctx, id); err != nil {
			return 0, registrar.Material{}, prog.fail("", err)
		}
		if bd != nil {
			break
		}
		claim := &binding{host: op.Host, spec: op.Spec, state: stateClaimed, createdAt: op.Now.UTC().Format(time.RFC3339Nano)}
		version, lost, err := b.writeBinding(ctx, OpBindingClaim, id, claim, 0)
		if err != nil {
			return 0, registrar.Material{}, prog.fail("binding claimed", err)
		}
		if !lost {
			claim.version = version
			bd = claim
			prog.done("binding claimed")
		}
		// A lost claim: another mint claimed it first; read it.
	}
	switch {
	case bd.host != op.Host:
		return registrar.MintCollision, registrar.Material{}, nil
	case bd.spec != op.Spec:
		return registrar.MintSpecConflict, registrar.Material{}, nil
	}

	name := RoleName(id)
	rolePath := path.Join("auth", b.approle, "role", name)
	err = b.tel.request(ctx, OpRoleWrite, b.timeout, func(ctx context.Context) error {
		_, err := b.client.Logical().WriteWithContext(ctx, rolePath, map[string]any{
			// Exactly what TokenPolicy's allowed_parameters admit: one
			// operator-written policy as a string, the numbers as strings.
			"token_policies":     ServicePolicyName(op.Spec.ServiceName),
			"bind_secret_id":     true,
			"secret_id_ttl":      secondsText(b.ttl),
			"secret_id_num_uses": strconv.FormatUint(uint64(b.uses), 10),
		})
		return err
	})
	if err != nil {
		return 0, registrar.Material{}, prog.fail("role written", err)
	}
	prog.done("role written")

	var roleID string
	err = b.tel.request(ctx, OpRoleIDRead, b.timeout, func(ctx context.Context) error {
		s, err := b.client.Logical().ReadWithContext(ctx, rolePath+"/role-id")
		if err != nil {
			return err
		}
		if s != nil {
			roleID, _ = s.Data["role_id"].(string)
		}
		if roleID == "" {
			return b.tel.badResponse(ctx, OpRoleIDRead, fmt.Errorf("reading %s/role-id: no role_id (was the role deleted meanwhile?)", rolePath))
		}
		return nil
	})
	if err != nil {
		return 0, registrar.Material{}, prog.fail("", err)
	}

	var wrapped, accessor string
	err = b.tel.request(ctx, OpSecretIDWrap, b.timeout, func(ctx context.Context) error {
		req := b.client.NewRequest(http.MethodPut, "/v1/"+rolePath+"/secret-id")
		req.WrapTTL = strconv.FormatInt(int64(op.WrapTTL/time.Second), 10) + "s"
		if err := req.SetJSONBody(map[string]any{}); err != nil {
			return err
		}
		resp, err := b.client.RawRequestWithContext(ctx, req)
		if resp != nil {
			defer resp.Body.Close()
		}
		if err != nil {
			return err
		}
		s, err := api.ParseSecret(resp.Body)
		if err != nil {
			return b.tel.badResponse(ctx, OpSecretIDWrap, fmt.Errorf("decoding the wrapped secret id: %w", err))
		}
		if s == nil || s.WrapInfo == nil || s.WrapInfo.Token == "" {
			return b.tel.badResponse(ctx, OpSecretIDWrap, errors.New("the answer carries no wrapping token (is response wrapping disabled?)"))
		}
		wrapped = s.WrapInfo.Token
		// For a secret id the server names the wrapped secret id's
		// accessor: kept in the binding, it lets the next mint destroy it.
		accessor = s.WrapInfo.WrappedAccessor
		return nil
	})
	if err != nil {
		return 0, registrar.Material{}, prog.fail("secret id issued", err)
	}
	prog.done("secret id issued")

	mat := registrar.Material{RoleID: roleID, WrappedSecretID: wrapped, ExpiresAt: op.Now.Add(op.WrapTTL)}
	if bd.state == stateActive {
		return b.remint(ctx, &prog, id, rolePath, bd, accessor, mat)
	}
	active := *bd
	active.state = stateActive
	if accessor != "" {
		active.secretIDAccessor = accessor
	}
	_, lost, err := b.writeBinding(ctx, OpBindingActivate, id, &active, bd.version)
	if err != nil {
		return 0, registrar.Material{}, prog.fail("binding activated", err)
	}
	if !lost {
		return registrar.MintCreated, mat, nil
	}
	// Another mint activated it first (or changed it): whoever won is the
	// first mint. This one is a remint if the binding still says the same.
	now, err := b.readBinding(ctx, id)
	if err != nil {
		return 0, registrar.Material{}, prog.fail("", err)
	}
	if now == nil || now.state != stateActive || now.host != op.Host || now.spec != op.Spec {
		return 0, registrar.Material{}, prog.fail("", fmt.Errorf("openbao: mint %q: the binding at %s changed while this mint completed it", id, b.BindingPath(id)))
	}
	return registrar.MintReissued, mat, nil
}

// remint finishes a mint of an active binding: the previous secret id (its
// accessor in the binding) is destroyed, then the binding records the new
// one's accessor. A destroy that fails fails the mint (partial: the new
// secret id exists), and the binding still names the previous accessor, so
// the retry destroys it; an accessor the server no longer knows (expired,
// or destroyed by an attempt whose answer was lost) counts as destroyed.
func (b *Backend) remint(ctx context.Context, prog *progress, id, rolePath string, bd *binding, accessor string, mat registrar.Material) (registrar.MintStatus, registrar.Material, error) {
	if accessor == "" || accessor == bd.secretIDAccessor {
		return registrar.MintReissued, mat, nil
	}
	if prev := bd.secretIDAccessor; prev != "" {
		err := b.tel.request(ctx, OpSecretIDDestroy, b.timeout, func(ctx context.Context) error {
			_, err := b.client.Logical().WriteWithContext(ctx, rolePath+"/secret-id-accessor/destroy", map[string]any{"secret_id_accessor": prev})
			if isUnknownAccessor(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return 0, registrar.Material{}, prog.fail("previous secret id destroyed", err)
		}
		prog.done("previous secret id destroyed")
	}
	next := *bd
	next.secretIDAccessor = accessor
	_, _, err := b.writeBinding(ctx, OpBindingActivate, id, &next, bd.version)
	if err != nil {
		return 0, registrar.Material{}, prog.fail("binding updated", err)
	}
	// A lost compare-and-set: another daemon reminted meanwhile and its
	// accessor is the one recorded; this secret id lives until its TTL.
	return registrar.MintReissued, mat, nil
}

// Deregister implements registrar.Backend: host check, then delete the
// role and the binding, in that order.
func (b *Backend) Deregister(ctx context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	if op.RegistrationID == "" || op.Host == "" || !isName(op.RegistrationID) {
		return 0, fmt.Errorf("%w: registration id %q, host %q", ErrInvalidOp, op.RegistrationID, op.Host)
	}
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	unlock, err := b.ids.lock(ctx, op.RegistrationID)
	if err != nil {
		err = b.tel.saturated(ctx, OpBindingRead, fmt.Errorf("waiting for another operation on %q to finish: %w", op.RegistrationID, err))
		b.logFailure(ctx, "deregister", op.RegistrationID, err)
		return 0, err
	}
	defer unlock()
	if err := b.acquire(ctx, OpBindingRead); err != nil {
		b.logFailure(ctx, "deregister", op.RegistrationID, err)
		return 0, err
	}
	defer b.release()
	status, err := b.deregister(ctx, op)
	if err != nil {
		b.logFailure(ctx, "deregister", op.RegistrationID, err)
		return 0, err
	}
	return status, nil
}

func (b *Backend) deregister(ctx context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	var prog progress
	id := op.RegistrationID
	bd, err := b.readBinding(ctx, id)
	switch {
	case err != nil:
		return 0, err
	case bd == nil:
		return registrar.DeregisterAbsent, nil
	case bd.host != op.Host:
		return registrar.DeregisterHostMismatch, nil
	}
	name := RoleName(id)
	err = b.tel.request(ctx, OpRoleDelete, b.timeout, func(ctx context.Context) error {
		_, err := b.client.Logical().DeleteWithContext(ctx, path.Join("auth", b.approle, "role", name))
		return err
	})
	if err != nil {
		return 0, prog.fail("role deleted", err)
	}
	prog.done("role deleted")
	err = b.tel.request(ctx, OpBindingDelete, b.timeout, func(ctx context.Context) error {
		return b.kv.DeleteMetadata(ctx, b.BindingPath(id))
	})
	if err != nil {
		return 0, prog.fail("binding deleted", err)
	}
	return registrar.DeregisterRemoved, nil
}

func (b *Backend) logFailure(ctx context.Context, verb, id string, err error) {
	attrs := []slog.Attr{slog.String("verb", verb), slog.String("registration_id", id), slog.String("error", err.Error())}
	if re, ok := errors.AsType[*RequestError](err); ok {
		attrs = append(attrs, slog.String("operation", re.Op.String()), slog.String("kind", re.Kind.String()))
		if re.Status != 0 {
			attrs = append(attrs, slog.Int("status", re.Status))
		}
	}
	if p, ok := errors.AsType[*registrar.PartialError](err); ok {
		attrs = append(attrs, slog.String("changed", strings.Join(p.Changed, ", ")))
	}
	b.log.LogAttrs(ctx, slog.LevelWarn, "openbao request failed", attrs...)
}

func checkMint(op registrar.MintOp) error {
	switch {
	case op.RegistrationID == "" || op.Host == "":
		return fmt.Errorf("%w: empty registration id or host", ErrInvalidOp)
	case !isName(op.RegistrationID):
		return fmt.Errorf("%w: registration id %q is not [a-z0-9-]", ErrInvalidOp, op.RegistrationID)
	case !isName(op.Spec.ServiceName):
		return fmt.Errorf("%w: spec service name %q is not [a-z0-9-]", ErrInvalidOp, op.Spec.ServiceName)
	case op.WrapTTL < time.Second:
		return fmt.Errorf("%w: wrap TTL %s is under a second", ErrInvalidOp, op.WrapTTL)
	case op.Now.IsZero():
		return fmt.Errorf("%w: Now is zero", ErrInvalidOp)
	}
	return nil
}

// isName reports whether s is 1–131 octets of [a-z0-9-]: what the verbs
// derive, and all that may appear in a role name, policy name or path.
func isName(s string) bool {
	if len(s) == 0 || len(s) > 131 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
