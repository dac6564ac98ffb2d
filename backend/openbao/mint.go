package openbao

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/registrar"
)

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
		// claimed: this mint claimed the binding, so it is its owner's.
		claimed bool
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
		// About to create: the reservation comes before the claim, the
		// first write, under the id's lock. A refusal writes nothing. A
		// claim lost to another daemon reads the winner's binding and
		// creates nothing (the verbs release the slot on its status).
		if !op.Reserves() {
			return registrar.MintCeilingReached, registrar.Material{}, nil
		}
		claim := &binding{host: op.Host, spec: op.Spec, state: stateClaimed, createdAt: op.Now.UTC().Format(time.RFC3339Nano), owner: op.Owner}
		version, lost, err := b.writeBinding(ctx, OpBindingClaim, id, claim, 0)
		if err != nil {
			return 0, registrar.Material{}, prog.fail("binding claimed", err)
		}
		if !lost {
			claim.version = version
			bd, claimed = claim, true
			prog.done("binding claimed")
		}
		// A lost claim: another mint claimed it first; read it.
	}
	// Ownership first, under the id's lock and on the binding just read
	// (one this mint claimed is its own): a caller that may not act
	// learns nothing else, and nothing is written.
	if !claimed && !op.Permits(bd.owner) {
		return registrar.MintNotOwner, registrar.Material{}, nil
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
	if now == nil || now.state != stateActive || now.host != op.Host || now.spec != op.Spec || now.owner != bd.owner {
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
