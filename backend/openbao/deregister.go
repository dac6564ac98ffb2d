package openbao

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// Deregister implements registrar.Backend: ownership check, host check,
// then delete the role and the binding, in that order.
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
	b.claims.init()
	var (
		prog progress
		w    waiter
		lost int
	)
	id := op.RegistrationID
	for {
		if lost == maxLostRaces {
			return 0, prog.fail("", b.tel.saturated(ctx, OpBindingClaim,
				fmt.Errorf("%w: the binding at %s kept changing (%d compare-and-set writes lost)", ErrClaimHeld, b.BindingPath(id), lost)))
		}
		bd, err := b.readBinding(ctx, id)
		if err != nil {
			return 0, prog.fail("", err)
		}
		if bd == nil {
			// No binding. A role left without one (by a registrar older
			// than the claims, or one that outlived its claim) is an
			// orphan: claim the absent binding, as a mint would, so no
			// mint makes the role meanwhile, and remove both.
			exists, err := b.roleExists(ctx, id)
			if err != nil {
				return 0, prog.fail("", err)
			}
			if !exists {
				return registrar.DeregisterAbsent, nil
			}
			ph := &binding{host: op.Host, state: stateRemoving, createdAt: b.claims.now().UTC().Format(time.RFC3339Nano)}
			l, err := b.removeClaimed(ctx, &prog, id, ph, 0)
			if err != nil {
				return 0, err
			}
			if l {
				lost++
				continue
			}
			return registrar.DeregisterAbsent, nil
		}
		if st, exp := b.claimOf(bd); st == claimByOther {
			if err := b.wait(ctx, &w, id, exp); err != nil {
				return 0, prog.fail("", err)
			}
			continue
		}
		switch {
		case !op.Permits(bd.owner):
			return registrar.DeregisterNotOwner, nil
		case bd.host != op.Host:
			return registrar.DeregisterHostMismatch, nil
		}
		l, err := b.removeClaimed(ctx, &prog, id, bd, bd.version)
		if err != nil {
			return 0, err
		}
		if l {
			lost++
			continue
		}
		return registrar.DeregisterRemoved, nil
	}
}

// removeClaimed claims bd in state "removing" with a compare-and-set on cas
// (0: only if absent), then deletes the role (and with it every secret id
// it issued) and then the binding with all its versions, so a later claim
// with cas=0 succeeds and a role never outlives its binding. lost reports
// a claim that lost its compare-and-set: nothing was written.
func (b *Backend) removeClaimed(ctx context.Context, prog *progress, id string, bd *binding, cas int) (lost bool, err error) {
	rm := *bd
	rm.state = stateRemoving
	h, lost, err := b.claim(ctx, id, &rm, cas)
	if err != nil {
		return false, prog.fail("binding claimed", err)
	}
	if lost {
		return true, nil
	}
	prog.done("binding claimed")
	if err := b.before(h, id, "role_delete"); err != nil {
		return false, prog.fail("", err)
	}
	err = b.tel.request(ctx, OpRoleDelete, b.timeout, func(ctx context.Context) error {
		_, err := b.client.Logical().DeleteWithContext(ctx, path.Join("auth", b.approle, "role", RoleName(id)))
		return err
	})
	if err != nil {
		return false, prog.fail("role deleted", err)
	}
	prog.done("role deleted")
	if err := b.before(h, id, "binding_delete"); err != nil {
		return false, prog.fail("", err)
	}
	err = b.tel.request(ctx, OpBindingDelete, b.timeout, func(ctx context.Context) error {
		return b.kv.DeleteMetadata(ctx, b.BindingPath(id))
	})
	if err != nil {
		return false, prog.fail("binding deleted", err)
	}
	prog.done("binding deleted")
	return false, nil
}

// roleExists reads the role's role id: a role without a binding is an
// orphan for a deregister to remove.
func (b *Backend) roleExists(ctx context.Context, id string) (bool, error) {
	var exists bool
	err := b.tel.request(ctx, OpRoleIDRead, b.timeout, func(ctx context.Context) error {
		s, err := b.client.Logical().ReadWithContext(ctx, path.Join("auth", b.approle, "role", RoleName(id), "role-id"))
		exists = err == nil && s != nil && s.Data["role_id"] != nil
		return err
	})
	return exists, err
}
