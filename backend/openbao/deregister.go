package openbao

import (
	"context"
	"fmt"
	"path"

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
	var prog progress
	id := op.RegistrationID
	bd, err := b.readBinding(ctx, id)
	switch {
	case err != nil:
		return 0, err
	case bd == nil:
		return registrar.DeregisterAbsent, nil
	case !op.Permits(bd.owner):
		return registrar.DeregisterNotOwner, nil
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
