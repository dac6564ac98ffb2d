package openbao

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
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
	b.claims.init()
	var (
		prog progress
		w    waiter
		lost int
		bd   *binding
		h    held
	)
	id := op.RegistrationID
	for bd == nil {
		if lost == maxLostRaces {
			return 0, registrar.Material{}, prog.fail("", b.tel.saturated(ctx, OpBindingClaim,
				fmt.Errorf("%w: the binding at %s kept changing (%d compare-and-set writes lost)", ErrClaimHeld, b.BindingPath(id), lost)))
		}
		cur, err := b.readBinding(ctx, id)
		if err != nil {
			return 0, registrar.Material{}, prog.fail("", err)
		}
		if cur == nil {
			// About to create: the reservation comes before the claim, the
			// first write, under the id's lock. A refusal writes nothing. A
			// claim lost to another registrar reads the winner's binding
			// and creates nothing (the verbs release the slot on its
			// status).
			if !op.Reserves() {
				return registrar.MintCeilingReached, registrar.Material{}, nil
			}
			nb := &binding{host: op.Host, spec: op.Spec, state: stateClaimed, createdAt: op.Now.UTC().Format(time.RFC3339Nano), owner: op.Owner}
			hh, l, err := b.claim(ctx, id, nb, 0)
			if err != nil {
				return 0, registrar.Material{}, prog.fail("binding claimed", err)
			}
			if l {
				lost++
				continue
			}
			prog.done("binding claimed")
			bd, h = nb, hh
			break
		}
		if st, exp := b.claimOf(cur); st == claimByOther {
			if err := b.wait(ctx, &w, id, exp); err != nil {
				return 0, registrar.Material{}, prog.fail("", err)
			}
			continue
		}
		if cur.state == stateRemoving {
			// A deregister that stopped half-way (its registrar died, or
			// it outlived its claim) decided the removal: finish it, then
			// mint the id afresh.
			l, err := b.removeClaimed(ctx, &prog, id, cur, cur.version)
			if err != nil {
				return 0, registrar.Material{}, err
			}
			if l {
				lost++
			}
			continue
		}
		// Ownership first, on the binding just read: a caller that may
		// not act learns nothing else, and nothing is written.
		if !op.Permits(cur.owner) {
			return registrar.MintNotOwner, registrar.Material{}, nil
		}
		switch {
		case cur.host != op.Host:
			return registrar.MintCollision, registrar.Material{}, nil
		case cur.spec != op.Spec:
			return registrar.MintSpecConflict, registrar.Material{}, nil
		}
		hh, l, err := b.claim(ctx, id, cur, cur.version)
		if err != nil {
			return 0, registrar.Material{}, prog.fail("binding claimed", err)
		}
		if l {
			lost++
			continue
		}
		prog.done("binding claimed")
		bd, h = cur, hh
	}
	// From here on this mint holds the claim: no other registrar writes
	// the role, issues or destroys a secret id of it, or writes the
	// binding until the claim is released or has expired.
	first := bd.state == stateClaimed

	name := RoleName(id)
	rolePath := path.Join("auth", b.approle, "role", name)
	if err := b.before(h, id, "role_write"); err != nil {
		return 0, registrar.Material{}, prog.fail("", err)
	}
	err := b.tel.request(ctx, OpRoleWrite, b.timeout, func(ctx context.Context) error {
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

	if err := b.before(h, id, "secret_id_wrap"); err != nil {
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
		// For a secret id the server names the wrapped secret id's
		// accessor: it tells this mint's secret id from every other.
		if s.WrapInfo.WrappedAccessor == "" {
			return b.tel.badResponse(ctx, OpSecretIDWrap, errors.New("the answer names no wrapped accessor"))
		}
		wrapped, accessor = s.WrapInfo.Token, s.WrapInfo.WrappedAccessor
		return nil
	})
	if err != nil {
		return 0, registrar.Material{}, prog.fail("secret id issued", err)
	}
	prog.done("secret id issued")

	// Every other secret id of the role goes before the new one is
	// recorded: the previous delivered one, and any a failed or dead
	// mint issued and never delivered.
	if err := b.destroyOthers(ctx, &prog, h, id, rolePath, accessor); err != nil {
		return 0, registrar.Material{}, err
	}

	if err := b.before(h, id, "binding_activate"); err != nil {
		return 0, registrar.Material{}, prog.fail("", err)
	}
	active := *bd
	active.state = stateActive
	active.secretIDAccessor = accessor
	active.claimOwner, active.claimExpires = "", ""
	_, l, err := b.writeBinding(ctx, OpBindingActivate, id, &active, h.version)
	if err != nil {
		return 0, registrar.Material{}, prog.fail("binding activated", err)
	}
	if l {
		// The claim was taken over: this mint outlived it, and another
		// registrar works on the binding now. The new secret id is not
		// delivered (the other one destroys it, and so does this).
		b.destroyOne(ctx, rolePath, accessor)
		return 0, registrar.Material{}, prog.fail("", b.tel.badResponse(ctx, OpBindingActivate,
			fmt.Errorf("%w: %q: another registrar took the binding over", errClaimLapsed, id)))
	}
	mat := registrar.Material{RoleID: roleID, WrappedSecretID: wrapped, ExpiresAt: op.Now.Add(op.WrapTTL)}
	if first {
		return registrar.MintCreated, mat, nil
	}
	return registrar.MintReissued, mat, nil
}

// destroyOthers lists the role's secret ids (their accessors) and destroys
// every one but keep's. An accessor the server no longer knows counts as
// destroyed. A failure fails the mint (partial: the new secret id exists
// and is not recorded); the retry lists again.
func (b *Backend) destroyOthers(ctx context.Context, prog *progress, h held, id, rolePath, keep string) error {
	var (
		accessors []string
		wrapToken string
	)
	err := b.tel.request(ctx, OpSecretIDList, b.timeout, func(ctx context.Context) error {
		// The token policy's min_wrapping_ttl on the path covers LIST too:
		// the list comes wrapped, and the wrapping token itself unwraps it
		// (no capability of the registrar's token is needed for that).
		req := b.client.NewRequest("LIST", "/v1/"+rolePath+"/secret-id")
		req.WrapTTL = "60s"
		s, err := b.rawSecret(ctx, req)
		if err != nil || s == nil {
			return err
		}
		if s.WrapInfo == nil || s.WrapInfo.Token == "" {
			return b.tel.badResponse(ctx, OpSecretIDList, fmt.Errorf("listing %s/secret-id: the answer is not wrapped", rolePath))
		}
		wrapToken = s.WrapInfo.Token
		return nil
	})
	if err == nil && wrapToken != "" {
		err = b.tel.request(ctx, OpSecretIDListUnwrap, b.timeout, func(ctx context.Context) error {
			req := b.client.NewRequest(http.MethodPut, "/v1/sys/wrapping/unwrap")
			req.ClientToken = wrapToken
			s, err := b.rawSecret(ctx, req)
			if err != nil || s == nil || s.Data == nil {
				return err
			}
			keys, ok := s.Data["keys"].([]any)
			if !ok {
				return b.tel.badResponse(ctx, OpSecretIDListUnwrap, fmt.Errorf("listing %s/secret-id: no keys in the answer", rolePath))
			}
			for _, k := range keys {
				a, ok := k.(string)
				if !ok {
					return b.tel.badResponse(ctx, OpSecretIDListUnwrap, fmt.Errorf("listing %s/secret-id: a key that is not a string", rolePath))
				}
				accessors = append(accessors, a)
			}
			return nil
		})
	}
	if err != nil {
		return prog.fail("", err)
	}
	if !slices.Contains(accessors, keep) {
		return prog.fail("", b.tel.badResponse(ctx, OpSecretIDList, fmt.Errorf("listing %s/secret-id: the secret id just issued is not listed (was the role written again meanwhile?)", rolePath)))
	}
	for _, a := range accessors {
		if a == keep {
			continue
		}
		if err := b.before(h, id, "secret_id_destroy"); err != nil {
			return prog.fail("", err)
		}
		err := b.tel.request(ctx, OpSecretIDDestroy, b.timeout, func(ctx context.Context) error {
			_, err := b.client.Logical().WriteWithContext(ctx, rolePath+"/secret-id-accessor/destroy", map[string]any{"secret_id_accessor": a})
			if isUnknownAccessor(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return prog.fail("other secret ids destroyed", err)
		}
	}
	if len(accessors) > 1 {
		prog.done("other secret ids destroyed")
	}
	return nil
}

// rawSecret sends req and decodes the answer; a 404 is no secret.
func (b *Backend) rawSecret(ctx context.Context, req *api.Request) (*api.Secret, error) {
	resp, err := b.client.RawRequestWithContext(ctx, req)
	if resp != nil {
		defer resp.Body.Close()
	}
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := api.ParseSecret(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decoding the answer: %w", err)
	}
	return s, nil
}

// destroyOne destroys one secret id by its accessor, best effort: for a
// mint that will not deliver it.
func (b *Backend) destroyOne(ctx context.Context, rolePath, accessor string) {
	_ = b.tel.request(ctx, OpSecretIDDestroy, b.timeout, func(ctx context.Context) error {
		_, err := b.client.Logical().WriteWithContext(ctx, rolePath+"/secret-id-accessor/destroy", map[string]any{"secret_id_accessor": accessor})
		if isUnknownAccessor(err) {
			return nil
		}
		return err
	})
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
