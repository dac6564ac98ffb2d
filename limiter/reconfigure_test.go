package limiter

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

const ms = Instant(time.Millisecond)

func mustReconfigure(t testing.TB, l *Limiter, c Config, now Instant) {
	t.Helper()
	if err := l.ReconfigureAt(c, now); err != nil {
		t.Fatalf("ReconfigureAt: %v", err)
	}
}

func TestReconfigureKeepsADrainedBucketDrained(t *testing.T) {
	l := mustNew(t, cfg(4, time.Second, 8, 500*time.Millisecond), nil)
	t0 := 10 * sec
	if got := admitted(l, "drained", vocab.Mint, vocab.Admission, t0, 20); got != 8 {
		t.Fatalf("old burst: %d admitted, want 8", got)
	}
	mustReconfigure(t, l, cfg(4, time.Second, 64, 100*time.Millisecond), t0)
	if d := l.ChargeAt(context.Background(), "drained", vocab.Mint, vocab.Admission, t0); d.Allowed {
		t.Fatal("a bucket drained before the reload was charged at once after it: the reload minted a token")
	}
	// It accrues under the new interval: one token 100 ms later, not 500.
	if got := admitted(l, "drained", vocab.Mint, vocab.Admission, t0+99*ms, 5); got != 0 {
		t.Fatalf("%d admitted at +99 ms, want 0", got)
	}
	if got := admitted(l, "drained", vocab.Mint, vocab.Admission, t0+100*ms, 5); got != 1 {
		t.Fatalf("%d admitted at +100 ms, want 1 (one new interval)", got)
	}
	// It fills to the new burst, not the old.
	if got := admitted(l, "drained", vocab.Mint, vocab.Admission, t0+100*ms+64*100*ms, 100); got != 64 {
		t.Fatalf("%d admitted once refilled, want the new burst 64", got)
	}
	// A new identity gets the new burst at once.
	if got := admitted(l, "fresh", vocab.Mint, vocab.Admission, t0, 100); got != 64 {
		t.Fatalf("new identity: %d admitted, want the new burst 64", got)
	}
	if p := l.Params(); p.Admission.Burst != 64 || p.Admission.RefillInterval != 100*time.Millisecond {
		t.Fatalf("Params = %+v, want the new admission sizes", p)
	}
}

func TestReconfigureCapsTokensAtTheNewBurst(t *testing.T) {
	l := mustNew(t, cfg(32, time.Second, 64, time.Second), nil)
	if got := admitted(l, "a", vocab.Deregister, vocab.Admission, sec, 1); got != 1 {
		t.Fatal("first charge denied")
	}
	mustReconfigure(t, l, cfg(2, time.Second, 8, time.Second), sec)
	if got := admitted(l, "a", vocab.Deregister, vocab.Admission, sec, 100); got != 8 {
		t.Fatalf("%d admitted after shrinking the burst to 8 with 63 held, want 8", got)
	}
}

func TestReconfigureKeepsTheBankedFractionWithoutAddingAToken(t *testing.T) {
	l := mustNew(t, cfg(1, time.Second, 1, time.Second), nil)
	t0 := 5 * sec
	admitted(l, "a", vocab.Mint, vocab.PredecisionRefusal, t0, 1) // drained at t0, 0.6 s banked at t0+600ms
	mustReconfigure(t, l, cfg(1, 500*time.Millisecond, 1, time.Second), t0+600*ms)
	// 0.6 of a token is 300 ms of the new 500 ms interval: the next token
	// at t0+800ms, not at once (the new interval had passed since t0) and
	// not at t0+1s (the banked time kept).
	if got := admitted(l, "a", vocab.Mint, vocab.PredecisionRefusal, t0+799*ms, 1); got != 0 {
		t.Fatal("admitted at +799 ms: the reload added to the banked fraction")
	}
	if got := admitted(l, "a", vocab.Mint, vocab.PredecisionRefusal, t0+800*ms, 1); got != 1 {
		t.Fatal("denied at +800 ms: the banked fraction was dropped")
	}
}

func TestReconfigureMovesTheOverflowBuckets(t *testing.T) {
	l := mustNew(t, cfg(32, time.Second, 1, time.Second), nil)
	saturateDrained(t, l, 0)
	if d := l.ChargeAt(context.Background(), "late0", vocab.Mint, vocab.Admission, 0); !d.Allowed || !d.Overflow {
		t.Fatalf("first overflow charge: %+v, want allowed on the overflow bucket", d)
	}
	mustReconfigure(t, l, cfg(32, time.Second, 4, time.Millisecond), 0)
	checkInvariants(t, l)
	// The overflow bucket, drained under burst 1 per second, accrues at the
	// new rate: three tokens 3 ms later (every entry holds 3 of 4, so none
	// is reclaimed and the charges stay on the overflow bucket).
	got := 0
	for i := range 10 {
		d := l.ChargeAt(context.Background(), "late"+strconv.Itoa(i), vocab.Mint, vocab.Admission, 3*ms)
		if !d.Overflow {
			t.Fatalf("charge %d at +3 ms: %+v, want the overflow bucket", i, d)
		}
		if d.Allowed {
			got++
		}
	}
	if got != 3 {
		t.Fatalf("overflow bucket at +3 ms: %d admitted, want 3 under the new 1 ms interval", got)
	}
	// Shrinking applies to an overflow bucket that holds more.
	l2 := mustNew(t, cfg(32, time.Second, 8, time.Second), nil)
	saturateDrained(t, l2, 0)
	mustReconfigure(t, l2, cfg(32, time.Second, 2, time.Second), 0)
	got = 0
	for i := range 20 {
		d := l2.ChargeAt(context.Background(), "x"+strconv.Itoa(i), vocab.Deregister, vocab.Admission, 0)
		if !d.Overflow {
			t.Fatalf("charge %d did not fall on the overflow bucket", i)
		}
		if d.Allowed {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("full overflow bucket of burst 8 after a reload to burst 2: %d admitted, want 2", got)
	}
}

func TestReconfigureOverflowUsesTheNewInterval(t *testing.T) {
	l := mustNew(t, cfg(32, time.Second, 1, time.Hour), nil)
	saturateDrained(t, l, 0)
	if !l.ChargeAt(context.Background(), "o", vocab.Deregister, vocab.Admission, 0).Allowed {
		t.Fatal("full overflow bucket denied")
	}
	// Burst 2, so the drained entries (1 of 2 a second later) stay below
	// full and the charge stays on the overflow bucket.
	mustReconfigure(t, l, cfg(32, time.Second, 2, time.Second), 0)
	d := l.ChargeAt(context.Background(), "o", vocab.Deregister, vocab.Admission, sec)
	if !d.Allowed || !d.Overflow {
		t.Fatalf("overflow charge one new interval later: %+v, want allowed (the old interval was an hour)", d)
	}
}

func TestReconfigureMakesEntriesFullAtTheNewBurstReclaimable(t *testing.T) {
	l := mustNew(t, cfg(32, time.Second, 8, time.Hour), nil)
	for i := range MaxEntries {
		admitted(l, "e"+strconv.Itoa(i), vocab.Mint, vocab.Admission, 0, 1) // 7 of 8 left
	}
	if d := l.ChargeAt(context.Background(), "new", vocab.Mint, vocab.Admission, 0); !d.Overflow {
		t.Fatalf("before the reload: %+v, want the overflow bucket (no entry is full)", d)
	}
	mustReconfigure(t, l, cfg(32, time.Second, 4, time.Hour), 0)
	checkShardIndex(t, l)
	if d := l.ChargeAt(context.Background(), "new2", vocab.Mint, vocab.Admission, 0); d.Overflow || !d.Allowed {
		t.Fatalf("after shrinking the burst to 4: %+v, want a reclaimed slot (every entry is full now)", d)
	}
}

func TestReconfigureRejectsZeroAndChangesNothing(t *testing.T) {
	l := mustNew(t, cfg(4, time.Second, 8, time.Second), nil)
	for _, c := range []Config{cfg(0, time.Second, 8, time.Second), cfg(4, 0, 8, time.Second), cfg(4, time.Second, 0, time.Second), cfg(4, time.Second, 8, -1)} {
		if err := l.ReconfigureAt(c, 0); err == nil {
			t.Fatalf("ReconfigureAt(%+v) succeeded, want an error", c)
		}
	}
	if p := l.Params(); p.Admission != (BucketConfig{8, time.Second}) || p.PredecisionRefusal != (BucketConfig{4, time.Second}) {
		t.Fatalf("Params after refused reloads = %+v", p)
	}
	if got := admitted(l, "a", vocab.Mint, vocab.Admission, 0, 20); got != 8 {
		t.Fatalf("%d admitted, want the old burst 8", got)
	}
}

func TestReconfigureWithTheSameSizesChangesNoDecision(t *testing.T) {
	c := cfg(3, 700*time.Millisecond, 5, 1300*time.Millisecond)
	a, b := mustNew(t, c, nil), mustNew(t, c, nil)
	r := rand.New(rand.NewPCG(1, 2))
	now := Instant(0)
	for i := range 5000 {
		now += Instant(r.Int64N(int64(400 * ms)))
		if i%7 == 0 {
			mustReconfigure(t, b, c, now)
		}
		id, v, bk := "id"+strconv.Itoa(r.IntN(5)), vocab.Verb(r.IntN(2)), vocab.Bucket(r.IntN(2))
		da := a.ChargeAt(context.Background(), id, v, bk, now)
		db := b.ChargeAt(context.Background(), id, v, bk, now)
		if da != db {
			t.Fatalf("step %d: %+v without reloads, %+v with same-size reloads", i, da, db)
		}
	}
}

// checkReexpress is the property of one re-expression: for a bucket state
// st kept in old, re-expressed in nw at now, the result holds no more
// tokens than the new burst, than st holds under old at now, and than st
// would hold under nw at now; and at every later instant it holds no more
// than st would under nw (the banked fraction never becomes a token
// sooner than the new sizes allow).
func checkReexpress(t testing.TB, st tokenBucket, old, nw params, now Instant, later []Instant) {
	t.Helper()
	got := st
	got.reexpress(&old, &nw, now)
	at := max(now, st.accruedAt)
	a, c := st, st
	a.refill(&old, at)
	c.refill(&nw, at)
	if got.tokens > nw.burst || got.tokens > a.tokens || got.tokens > c.tokens {
		t.Fatalf("state %+v old %+v new %+v at %d: re-expressed %d tokens; new burst %d, under old %d, under new %d",
			st, old, nw, now, got.tokens, nw.burst, a.tokens, c.tokens)
	}
	if got.accruedAt > at {
		t.Fatalf("re-expressed accrual %d after the instant %d", got.accruedAt, at)
	}
	for _, u := range later {
		u = at + u
		if u < at {
			continue // wrapped
		}
		g, w := got, st
		g.refill(&nw, u)
		w.refill(&nw, u)
		if g.tokens > w.tokens {
			t.Fatalf("state %+v old %+v new %+v at %d: at %d holds %d, the new sizes from the state give %d",
				st, old, nw, now, u, g.tokens, w.tokens)
		}
	}
}

func TestReexpressNeverMintsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 25))
	pick := func() params {
		bursts := []uint32{1, 2, 7, 8, 64, 512, 1 << 31}
		ivs := []int64{1, 13, int64(ms), int64(500 * ms), int64(13 * sec), int64(time.Hour), 1 << 62}
		return params{burst: bursts[r.IntN(len(bursts))], interval: ivs[r.IntN(len(ivs))] + r.Int64N(3)}
	}
	for range 200000 {
		old, nw := pick(), pick()
		st := tokenBucket{tokens: uint32(r.Int64N(int64(old.burst) + 1)), accruedAt: Instant(r.Int64N(int64(1000 * sec)))}
		now := st.accruedAt + Instant(r.Int64N(4*old.interval+1)) - Instant(r.Int64N(int64(ms)))
		later := []Instant{0, 1, Instant(r.Int64N(nw.interval + 1)), Instant(nw.interval), Instant(r.Int64N(1 << 50))}
		checkReexpress(t, st, old, nw, now, later)
	}
}

func FuzzReexpressNeverMints(f *testing.F) {
	f.Add(uint32(8), int64(500e6), uint32(64), int64(100e6), uint32(0), int64(10e9), int64(10e9), int64(1))
	f.Add(uint32(64), int64(1e9), uint32(8), int64(5e9), uint32(3), int64(0), int64(7e9), int64(3e9))
	f.Add(uint32(1), int64(1), uint32(1<<31), int64(1<<62), uint32(0), int64(-1<<62), int64(1<<62), int64(1<<40))
	f.Fuzz(func(t *testing.T, ob uint32, oi int64, nb uint32, ni int64, tokens uint32, acc, now, later int64) {
		if ob == 0 || nb == 0 || oi <= 0 || ni <= 0 {
			return
		}
		old, nw := params{burst: ob, interval: oi}, params{burst: nb, interval: ni}
		st := tokenBucket{tokens: tokens % (ob + 1), accruedAt: Instant(acc)}
		if ob == ^uint32(0) {
			st.tokens = tokens
		}
		checkReexpress(t, st, old, nw, Instant(now), []Instant{0, Instant(later & (1<<62 - 1))})
	})
}

// TestReconfigureDuringChargesStaysConsistent runs charges and reloads
// concurrently (under -race) and then checks the map's invariants.
func TestReconfigureDuringChargesStaysConsistent(t *testing.T) {
	l := mustNew(t, cfg(4, time.Millisecond, 8, time.Millisecond), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			c := cfg(uint32(i%7+1), time.Duration(i%5+1)*time.Millisecond, uint32(i%11+1), time.Duration(i%3+1)*time.Millisecond)
			if err := l.Reconfigure(c); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			checkInvariants(t, l)
			return
		default:
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i%600))
		l.Charge(context.Background(), string(b[:]), vocab.Verb(i&1), vocab.Bucket(i>>1&1))
	}
}
