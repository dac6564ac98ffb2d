package openbao

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/registrar-otel/registrar-otel/registrar"
)

var _ registrar.Lister = (*Backend)(nil)

// listReaders bounds the binding reads one listing has in flight (and
// never more than openbao.max_in_flight): a listing runs at start, before
// serving, and then beside the verbs, whose slots it shares.
const listReaders = 8

// Registrations implements registrar.Lister: one LIST of the bindings'
// metadata (<kv_mount>/metadata/<kv_prefix>/bindings/, which TokenPolicy
// grants), then a read of each binding, several at a time, each holding
// one of the MaxInFlight slots (waiting for one as long as ctx allows,
// not SlotWait: a listing is not a caller to answer fast). A binding is
// listed whatever its state: "claimed" too (a mint that failed after
// claiming it; its retry completes it), and "removing" (a deregister that
// failed after claiming it: its retry answers DeregisterRemoved, which
// releases the slot counted from this listing). One deleted between the LIST and
// its read is not listed; one that cannot be read (a request error, a
// corrupt binding, a deleted current version) stops the listing with its
// error: a registry that cannot be read is not counted by guess. fn is
// called from this goroutine only.
func (b *Backend) Registrations(ctx context.Context, fn func(registrar.Registration) error) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	ids, err := b.listBindings(ctx)
	if err != nil {
		return fmt.Errorf("openbao: listing the registrations: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		id  string
		bd  *binding
		err error
	}
	next, results := make(chan string), make(chan result)
	go func() {
		defer close(next)
		for _, id := range ids {
			select {
			case next <- id:
			case <-lctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(listReaders, cap(b.slots), len(ids)) {
		wg.Go(func() {
			for id := range next {
				bd, err := b.readListed(lctx, id)
				select {
				case results <- result{id, bd, err}:
				case <-lctx.Done():
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(results)
	}()
	var first error
	for r := range results {
		switch {
		case first != nil: // draining
		case r.err != nil:
			first = fmt.Errorf("openbao: listing the registrations: %w", r.err)
			cancel()
		case r.bd != nil:
			if err := fn(registrar.Registration{ID: r.id, Host: r.bd.host, Component: r.bd.spec.Component, Owner: r.bd.owner}); err != nil {
				first = err
				cancel()
			}
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// listBindings returns the ids under <kv_prefix>/bindings/ (none when
// the path does not exist yet).
func (b *Backend) listBindings(ctx context.Context) ([]string, error) {
	if err := b.acquireWait(ctx, OpBindingList); err != nil {
		return nil, err
	}
	defer b.release()
	p := path.Join(b.kvMount, "metadata", b.prefix, "bindings")
	var ids []string
	err := b.tel.request(ctx, OpBindingList, b.timeout, func(ctx context.Context) error {
		s, err := b.client.Logical().ListWithContext(ctx, p)
		if err != nil || s == nil || s.Data == nil {
			return err
		}
		keys, ok := s.Data["keys"].([]any)
		if !ok {
			return b.tel.badResponse(ctx, OpBindingList, fmt.Errorf("listing %s: no keys in the answer", p))
		}
		for _, k := range keys {
			id, ok := k.(string)
			if !ok {
				return b.tel.badResponse(ctx, OpBindingList, fmt.Errorf("listing %s: a key that is not a string", p))
			}
			if !strings.HasSuffix(id, "/") { // a folder is no binding
				ids = append(ids, id)
			}
		}
		return nil
	})
	return ids, err
}

// readListed reads one listed binding, holding a slot.
func (b *Backend) readListed(ctx context.Context, id string) (*binding, error) {
	if err := b.acquireWait(ctx, OpBindingRead); err != nil {
		return nil, err
	}
	defer b.release()
	return b.readBinding(ctx, id)
}

// acquireWait takes one of the MaxInFlight slots, waiting as long as ctx
// allows; a ctx done first is a *RequestError of kind KindSaturated on op.
func (b *Backend) acquireWait(ctx context.Context, op Operation) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return b.tel.saturated(ctx, op, fmt.Errorf("waiting for a slot (openbao.max_in_flight): %w", ctx.Err()))
	}
}
