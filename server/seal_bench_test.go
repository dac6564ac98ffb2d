package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// BenchmarkAdmittedMintsC64OverSocket is issue 40's "admitted mints at
// c=64" as callers get them: 64 callers, each on its own keep-alive
// connection to the real unix socket, minting distinct registrations
// through the server and the real verbs (over the in-memory backend, a
// burst that never runs out) into a real audit store on the benchmark's
// disk, unsealed and sealed. As in registrar's
// BenchmarkAdmittedMintsC64Alternating, one op is a round of two slices
// (the order swapped every other round), and it reports the ratio of the
// sealed store's mints per second to the unsealed one's over all slices,
// and of their CPU per mint (the callers' included: they run in this
// process).
func BenchmarkAdmittedMintsC64OverSocket(b *testing.B) {
	const callers = 64
	var clients [2][callers]*wire.Client
	for k, sealed := range []bool{false, true} {
		store := audittest.OpenStore(b, sealed, 64<<20)
		rv := newRealVerbs(b, 32, 1<<31, registrartest.NewBackend(nil), nil, func(d *registrar.Deps) {
			d.Audit = store
			d.Now = nil // the real clock: the store stamps and rotates by it
		})
		path := serveUnix(b, newServer(b, rv.v, fixedHolder(b, 0, 0)))
		for i := range clients[k] {
			c := wire.NewUnixClient(path)
			b.Cleanup(c.CloseIdleConnections)
			clients[k][i] = c
		}
	}
	var host atomic.Int64
	slice := func(cs *[callers]*wire.Client) {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				req := wiretest.GoodMint()
				for range socketSlice / callers {
					req.Host = fmt.Sprintf("h%d", host.Add(1))
					res, err := c.Mint(context.Background(), req)
					if err != nil {
						b.Error(err)
						return
					}
					if res.StatusCode != http.StatusOK {
						b.Errorf("status %d: %s", res.StatusCode, res.Body)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	audittest.Alternate(b, socketSlice, func(which int) { slice(&clients[which]) })
}

// socketSlice is a slice's mints over the socket: about half a second.
const socketSlice = 64 * 80
