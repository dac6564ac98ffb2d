package openbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/registrar"
)

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
	// owner is the caller identity of the mint that claimed the binding
	// ("" for a binding written before owners were recorded, or claimed
	// by a mint that named none); every later write keeps it.
	owner string
	// claimOwner and claimExpires are the claim of the call working on
	// the binding (claim.go): the instance nonce of its registrar and the
	// expiry, RFC 3339 UTC by the holder's clock; "" when none holds it.
	claimOwner, claimExpires string
	version                  int // the KV version read
}

const (
	bindingFormat = "1"
	stateClaimed  = "claimed"
	stateActive   = "active"
	// stateRemoving: a deregister claimed the binding to remove it; it
	// deletes the role, then the binding. A call that finds it with the
	// claim expired finishes the removal.
	stateRemoving = "removing"
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
	if bd.owner != "" {
		m["owner"] = bd.owner
	}
	if bd.claimOwner != "" {
		m["claim_owner"] = bd.claimOwner
		m["claim_expires"] = bd.claimExpires
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
	// Optional like secret_id_accessor, and without a new format: a
	// binding written before owners were recorded reads as owner "".
	if o, ok := data["owner"]; ok {
		if bd.owner, ok = o.(string); !ok {
			return nil, fmt.Errorf("%w at %s (version %d): \"owner\" is not a string", ErrCorrupt, p, version)
		}
	}
	for k, dst := range map[string]*string{"claim_owner": &bd.claimOwner, "claim_expires": &bd.claimExpires} {
		if c, ok := data[k]; ok {
			if *dst, ok = c.(string); !ok {
				return nil, fmt.Errorf("%w at %s (version %d): %q is not a string", ErrCorrupt, p, version, k)
			}
		}
	}
	if v != bindingFormat {
		return nil, fmt.Errorf("%w at %s (version %d): format %q, want %q", ErrCorrupt, p, version, v, bindingFormat)
	}
	if bd.state != stateClaimed && bd.state != stateActive && bd.state != stateRemoving {
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
