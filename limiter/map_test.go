package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

type key struct {
	id string
	v  vocab.Verb
	b  vocab.Bucket
}

// snapshot returns every entry's key and tokens after a refill at now,
// without mutating the limiter (it refills copies).
// entries returns pointers to every entry in every shard.
func (l *Limiter) entries() []*entry {
	var es []*entry
	for i := range l.shards {
		for j := range l.shards[i].slots {
			if e := &l.shards[i].slots[j]; e.used {
				es = append(es, e)
			}
		}
	}
	return es
}

// lookup finds the key's entry.
func (l *Limiter) lookup(identity string, v vocab.Verb, b vocab.Bucket) (*entry, bool) {
	h := l.hash(identity, v, b)
	s := l.shardOf(h)
	i, ok := s.find(identity, h, v, b)
	return &s.slots[i], ok
}

func snapshot(l *Limiter, now Instant) map[key]uint32 {
	m := make(map[key]uint32)
	for _, e := range l.entries() {
		tb := e.tb
		tb.refill(&l.table.rows[e.policy].enforced[e.bucket], now)
		m[key{e.identity, e.verb, e.bucket}] = tb.tokens
	}
	return m
}

// checkInvariants asserts the table is consistent: count matches, every
// entry is findable, tokens are within [0, burst].
func checkInvariants(t testing.TB, l *Limiter) {
	t.Helper()
	checkShardIndex(t, l)
	n := 0
	for _, e := range l.entries() {
		n++
		if e.tb.tokens > l.table.rows[e.policy].enforced[e.bucket].burst {
			t.Fatalf("entry %q/%v/%v holds %d tokens, above the burst %d", e.identity, e.verb, e.bucket, e.tb.tokens, l.table.rows[e.policy].enforced[e.bucket].burst)
		}
		if _, ok := l.lookup(e.identity, e.verb, e.bucket); !ok {
			t.Fatalf("entry %q/%v/%v is not findable", e.identity, e.verb, e.bucket)
		}
	}
	if int64(n) != l.count[0].Load() || n > MaxEntries {
		t.Fatalf("table holds %d entries, count says %d, cap %d", n, l.count[0].Load(), MaxEntries)
	}
	for v := range l.overflow[0][0] {
		for b := range l.overflow[0][0][v] {
			if l.overflow[0][0][v][b].tokens > l.table.rows[0].enforced[b].burst {
				t.Fatalf("overflow bucket %v/%v above its burst", vocab.Verb(v), vocab.Bucket(b))
			}
		}
	}
}

// chargeChecked charges and asserts that every entry that disappeared was
// at its full burst at that instant: no path removes an entry below full.
func chargeChecked(t testing.TB, l *Limiter, id string, v vocab.Verb, b vocab.Bucket, now Instant) Decision {
	t.Helper()
	before := snapshot(l, now)
	d := l.ChargeAt(context.Background(), id, v, b, now)
	after := snapshot(l, now)
	for k, tokens := range before {
		if _, ok := after[k]; !ok && tokens < l.table.rows[0].enforced[k.b].burst {
			t.Fatalf("entry %q/%v/%v was removed holding %d of %d tokens", k.id, k.v, k.b, tokens, l.table.rows[0].enforced[k.b].burst)
		}
	}
	if !d.Allowed && d.RetryAfterSeconds < 1 {
		t.Fatalf("limited with retry-after %d, want ≥ 1", d.RetryAfterSeconds)
	}
	checkInvariants(t, l)
	return d
}

func TestManyIdentitiesStayWithinCap(t *testing.T) {
	l := mustNew(t, defaults(), nil)
	ctx := context.Background()
	for i := range 100_000 {
		id := "unix-peer:pid=" + strconv.Itoa(i) // an unstable identity
		l.ChargeAt(ctx, id, vocab.Verb(i%2), vocab.Bucket(i/2%2), Instant(i)*Instant(time.Millisecond))
		if l.count[0].Load() > MaxEntries {
			t.Fatalf("after %d identities the map holds %d entries, cap %d", i+1, l.count[0].Load(), MaxEntries)
		}
	}
	checkInvariants(t, l)
	if s := l.Stats(); s.Entries > MaxEntries || s.Reclaimed == 0 {
		t.Fatalf("stats %+v: want entries ≤ %d and some reclaimed", s, MaxEntries)
	}
}

func TestCapReclaimsEveryFullEntryAndAdmitsNewKey(t *testing.T) {
	l := mustNew(t, cfg(2, time.Second, 2, time.Second), nil)
	for i := range MaxEntries {
		chargeChecked(t, l, "id"+strconv.Itoa(i), vocab.Mint, vocab.Admission, 0) // 1 of 2 tokens left
	}
	if l.count[0].Load() != MaxEntries {
		t.Fatalf("count %d, want %d", l.count[0].Load(), MaxEntries)
	}
	// One interval later every entry is back at its full burst.
	d := chargeChecked(t, l, "newcomer", vocab.Deregister, vocab.PredecisionRefusal, sec)
	if !d.Allowed || d.Overflow {
		t.Fatalf("newcomer got %+v, want admitted on its own entry", d)
	}
	if s := l.Stats(); s.Entries != 1 || s.Reclaimed != MaxEntries {
		t.Fatalf("stats %+v, want 1 entry and all %d full entries reclaimed", s, MaxEntries)
	}
}

func TestCapReclaimsOnlyFullEntries(t *testing.T) {
	l := mustNew(t, cfg(2, time.Second, 2, time.Second), nil)
	// Half the entries are drained (2 charges), half hold 1 of 2 tokens.
	for i := range MaxEntries {
		id := "id" + strconv.Itoa(i)
		chargeChecked(t, l, id, vocab.Mint, vocab.Admission, 0)
		if i%2 == 0 {
			chargeChecked(t, l, id, vocab.Mint, vocab.Admission, 0)
		}
	}
	// After one interval the odd ones are full, the even ones hold 1.
	chargeChecked(t, l, "newcomer", vocab.Mint, vocab.Admission, sec)
	if s := l.Stats(); s.Entries != MaxEntries/2+1 || s.Reclaimed != MaxEntries/2 {
		t.Fatalf("stats %+v, want %d entries after reclaiming the %d full ones", s, MaxEntries/2+1, MaxEntries/2)
	}
	for i := 0; i < MaxEntries; i += 2 {
		id := "id" + strconv.Itoa(i)
		if _, ok := l.lookup(id, vocab.Mint, vocab.Admission); !ok {
			t.Fatalf("entry %s below full was removed", id)
		}
	}
}

// saturateDrained fills the map with drained (mint, admission) entries: no
// entry carries any other (verb, bucket) pair.
func saturateDrained(t testing.TB, l *Limiter, now Instant) {
	t.Helper()
	for i := range MaxEntries {
		id := "drained" + strconv.Itoa(i)
		for l.ChargeAt(context.Background(), id, vocab.Mint, vocab.Admission, now).Allowed {
		}
	}
	if l.count[0].Load() != MaxEntries {
		t.Fatalf("count %d after saturating, want %d", l.count[0].Load(), MaxEntries)
	}
}

func TestDrainedCapChargesOverflowBucketOfThePair(t *testing.T) {
	for _, pair := range everyPair {
		t.Run(pair.v.String()+"/"+pair.b.String(), func(t *testing.T) {
			l := mustNew(t, cfg(3, time.Second, 3, time.Second), nil)
			saturateDrained(t, l, 0)
			// Absent keys share the pair's overflow bucket, sized like an
			// entry of that bucket: 3 admitted, then limited on its tokens.
			var got []bool
			for i := range 5 {
				d := chargeChecked(t, l, "absent"+strconv.Itoa(i), pair.v, pair.b, sec/2)
				if !d.Overflow {
					t.Fatalf("charge %d did not fall on the overflow bucket: %+v", i, d)
				}
				got = append(got, d.Allowed)
			}
			if want := "[true true true false false]"; fmt.Sprint(got) != want {
				t.Fatalf("overflow decisions %v, want %v", got, want)
			}
			s := l.Stats()
			if s.Entries != MaxEntries || s.OverflowCharges[pair.v][pair.b] != 5 {
				t.Fatalf("stats %+v, want %d entries and 5 overflow charges on %v/%v", s, MaxEntries, pair.v, pair.b)
			}
			// The other overflow buckets are untouched and full.
			for v := range vocab.NumVerbs {
				for b := range vocab.NumBuckets {
					if (vocab.Verb(v) != pair.v || vocab.Bucket(b) != pair.b) && l.overflow[0][0][v][b].tokens != 3 {
						t.Fatalf("overflow %v/%v holds %d, want 3", vocab.Verb(v), vocab.Bucket(b), l.overflow[0][0][v][b].tokens)
					}
				}
			}
		})
	}
}

func TestOverflowRefillsAndRetryAfterHolds(t *testing.T) {
	l := mustNew(t, cfg(1, 4*time.Second, 1, 4*time.Second), nil)
	saturateDrained(t, l, 0)
	d := chargeChecked(t, l, "x", vocab.Mint, vocab.PredecisionRefusal, sec)
	if !d.Allowed || !d.Overflow {
		t.Fatalf("first overflow charge %+v, want admitted", d)
	}
	d = chargeChecked(t, l, "y", vocab.Mint, vocab.PredecisionRefusal, sec)
	if d.Allowed || d.RetryAfterSeconds != 4 {
		t.Fatalf("second overflow charge %+v, want limited with retry-after 4", d)
	}
}

func TestMapProperty(t *testing.T) {
	// Random traffic from a pool larger than the cap, with time moving
	// forward and occasionally backwards (clock read outside the lock).
	rng := rand.New(rand.NewPCG(7, 11))
	l := mustNew(t, cfg(3, 700*time.Millisecond, 5, 300*time.Millisecond), nil)
	now := Instant(0)
	for range 8_000 {
		now += Instant(rng.Int64N(int64(50 * time.Millisecond)))
		at := now
		if rng.IntN(10) == 0 {
			at -= Instant(rng.Int64N(int64(time.Second)))
		}
		id := "id" + strconv.Itoa(rng.IntN(400))
		chargeChecked(t, l, id, vocab.Verb(rng.IntN(2)), vocab.Bucket(rng.IntN(2)), at)
	}
}

func TestOneEventPerLimitedChargeNonePerAdmitted(t *testing.T) {
	rec := &recorder{}
	l := mustNew(t, cfg(3, time.Second, 5, time.Second), rec)
	ctx := context.Background()
	limited := 0
	for range 20 {
		if !l.ChargeAt(ctx, "c", vocab.Deregister, vocab.Admission, 0).Allowed {
			limited++
		}
	}
	if limited != 15 || rec.len() != 15 {
		t.Fatalf("limited %d charges and published %d events, want 15 and 15", limited, rec.len())
	}
	ev := rec.events[0]
	want := Event{Identity: "c", Verb: vocab.Deregister, Bucket: vocab.Admission, RetryAfterSeconds: 1, Policy: DefaultPolicy}
	if ev != want {
		t.Fatalf("event %+v, want %+v", ev, want)
	}
}

func TestDiscardSinkWorks(t *testing.T) {
	for _, s := range []Sink{nil, Discard} {
		l := mustNew(t, cfg(1, time.Second, 1, time.Second), s)
		if got := admitted(l, "c", vocab.Mint, vocab.Admission, 0, 3); got != 1 {
			t.Fatalf("with sink %v admitted %d, want 1", s, got)
		}
	}
}

// reentrant calls back into the limiter from the sink: it would deadlock if
// the event were published while the lock is held.
type reentrant struct {
	l     *Limiter
	depth int
}

func (r *reentrant) Limited(ctx context.Context, ev Event) {
	_ = r.l.Stats()
	if r.depth == 0 {
		r.depth++
		r.l.ChargeAt(ctx, "sink", ev.Verb, vocab.PredecisionRefusal, 0)
		r.depth--
	}
}

func TestEventPublishedAfterLockReleased(t *testing.T) {
	r := &reentrant{}
	l := mustNew(t, cfg(1, time.Second, 1, time.Second), r)
	r.l = l
	admitted(l, "c", vocab.Mint, vocab.Admission, 0, 3) // returns only if the lock was free
}

func TestInvalidVerbOrBucketFailsClosed(t *testing.T) {
	rec := &recorder{}
	l := mustNew(t, defaults(), rec)
	for _, d := range []Decision{
		l.ChargeAt(context.Background(), "c", vocab.Verb(9), vocab.Admission, 0),
		l.ChargeAt(context.Background(), "c", vocab.Mint, vocab.Bucket(9), 0),
	} {
		if d.Allowed {
			t.Fatal("an invalid verb or bucket was admitted")
		}
	}
	if rec.len() != 0 || l.count[0].Load() != 0 {
		t.Fatalf("invalid charges published %d events and created %d entries", rec.len(), l.count[0].Load())
	}
}
