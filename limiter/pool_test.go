package limiter

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// localPrefix marks the local identities of these tests, as the daemon's
// classifier marks the unix socket's.
const localPrefix = "local:"

// newPooled is a limiter on the clock *now whose identities with
// localPrefix are local, each bucket of burst tokens refilled hourly.
func newPooled(t *testing.T, now *Instant, burst uint32) *Limiter {
	t.Helper()
	c := cfg(burst, time.Hour, burst, time.Hour)
	c.Now = func() Instant { return *now }
	c.Local = func(id string) bool { return strings.HasPrefix(id, localPrefix) }
	return mustNew(t, c, nil)
}

// drain charges identity's admission bucket until it is limited.
func drain(l *Limiter, identity string) {
	for l.Charge(context.Background(), identity, vocab.Mint, vocab.Admission).Allowed {
	}
}

// The attack of issue 27, item 5: remote identities (one per client
// certificate) drained the one shared map and its overflow bucket, and the
// unix caller's next mint was limited. Each pool is bounded on its own now.
func TestRemoteIdentitiesNeverDisplaceALocalCaller(t *testing.T) {
	var now Instant
	l := newPooled(t, &now, 2)
	// More drained remote identities than the remote cap: the map's
	// remote pool is full of drained entries and its overflow bucket
	// drained too.
	for i := range MaxEntries + 44 {
		drain(l, "registrar-client:dns:attacker-"+strconv.Itoa(i))
	}
	if d := l.Charge(context.Background(), "registrar-client:dns:one-more", vocab.Mint, vocab.Admission); d.Allowed || !d.Overflow {
		t.Fatalf("a new remote identity at the drained cap: %+v, want the drained overflow bucket", d)
	}
	d := l.Charge(context.Background(), localPrefix+"uid=0", vocab.Mint, vocab.Admission)
	if !d.Allowed || d.Overflow {
		t.Fatalf("the local caller's first mint: %+v, want admitted from its own entry", d)
	}
	st := l.Stats()
	if st.LocalEntries != 1 || st.Entries != MaxEntries+1 {
		t.Errorf("stats %+v, want %d remote entries and 1 local", st, MaxEntries)
	}
}

// The seed's rules hold in the local pool as in the remote one: at its
// cap, with every entry below full, a new local identity charges the local
// overflow bucket (always a bucket to charge), which remote charges never
// touch; and only full entries are reclaimed.
func TestTheLocalPoolKeepsTheRulesOfTheMap(t *testing.T) {
	var now Instant
	l := newPooled(t, &now, 2)
	for i := range MaxLocalEntries {
		drain(l, localPrefix+"uid="+strconv.Itoa(i))
	}
	// The remote pool is empty, so a remote charge gets an entry.
	if d := l.Charge(context.Background(), "remote", vocab.Mint, vocab.Admission); !d.Allowed || d.Overflow {
		t.Fatalf("a remote charge beside a full local pool: %+v, want its own entry", d)
	}
	for i := range 2 {
		d := l.Charge(context.Background(), localPrefix+"uid=new", vocab.Mint, vocab.Admission)
		if d.Allowed != (i < 2) || !d.Overflow {
			t.Fatalf("charge %d of a new local identity at the drained local cap: %+v, want the local overflow bucket", i, d)
		}
	}
	if d := l.Charge(context.Background(), localPrefix+"uid=new2", vocab.Mint, vocab.Admission); d.Allowed || !d.Overflow {
		t.Fatalf("after draining the local overflow: %+v, want limited on it", d)
	}
	// Nothing was full: nothing reclaimed, every drained entry still held.
	if st := l.Stats(); st.Reclaimed != 0 || st.LocalEntries != MaxLocalEntries {
		t.Fatalf("stats %+v, want nothing reclaimed and the local pool full", st)
	}
	// Once the entries are full again, they are reclaimed and a new local
	// identity gets an entry.
	now += Instant(2 * time.Hour)
	if d := l.Charge(context.Background(), localPrefix+"uid=later", vocab.Mint, vocab.Admission); !d.Allowed || d.Overflow {
		t.Fatalf("after the refill: %+v, want a reclaimed slot", d)
	}
	if st := l.Stats(); st.LocalEntries != 1 || st.Entries != 1 || st.Reclaimed != MaxLocalEntries+1 {
		t.Errorf("stats %+v, want every full entry of both pools reclaimed (the remote one too)", st)
	}
}

// A reload re-expresses the overflow buckets of every pool: the local
// pool's, full at burst 8, is cut to the new burst 2 like the remote one's.
func TestReconfigureMovesTheOverflowBucketsOfBothPools(t *testing.T) {
	var now Instant
	l := newPooled(t, &now, 8)
	for i := range MaxLocalEntries {
		drain(l, localPrefix+"uid="+strconv.Itoa(i))
	}
	for i := range MaxEntries {
		drain(l, "remote-"+strconv.Itoa(i))
	}
	if err := l.Reconfigure(Config{
		PredecisionRefusal: BucketConfig{Burst: 2, RefillInterval: time.Hour},
		Admission:          BucketConfig{Burst: 2, RefillInterval: time.Hour},
	}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{localPrefix + "new", "remote-new"} {
		got := 0
		for i := range 10 {
			d := l.Charge(context.Background(), prefix+strconv.Itoa(i), vocab.Mint, vocab.Admission)
			if !d.Overflow {
				t.Fatalf("%s charge %d: %+v, want the overflow bucket", prefix, i, d)
			}
			if d.Allowed {
				got++
			}
		}
		if got != 2 {
			t.Errorf("%s: the full overflow bucket of burst 8 admitted %d after a reload to burst 2, want 2", prefix, got)
		}
	}
}

// A charge allocates nothing, on either pool, on an entry or on an
// overflow bucket, with the per-shard sizes a reload writes.
func TestChargeAllocatesNothingInEitherPool(t *testing.T) {
	var now Instant
	l := newPooled(t, &now, 2)
	if err := l.Reconfigure(Config{
		PredecisionRefusal: BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []struct {
		prefix string
		cap    int
	}{{"remote-", MaxEntries}, {localPrefix, MaxLocalEntries}} {
		ids := make([]string, pool.cap)
		for i := range ids {
			ids[i] = pool.prefix + strconv.Itoa(i)
		}
		i := 0
		// AllocsPerRun runs f once more than asked, to warm up.
		if n := testing.AllocsPerRun(pool.cap-1, func() {
			l.Charge(context.Background(), ids[i], vocab.Mint, vocab.Admission)
			i++
		}); n != 0 {
			t.Errorf("%sinserting a new entry allocated %v times per charge, want 0", pool.prefix, n)
		}
		extra := pool.prefix + "extra"
		for what, id := range map[string]string{"an entry": ids[0], "the overflow bucket": extra} {
			if n := testing.AllocsPerRun(100, func() {
				l.Charge(context.Background(), id, vocab.Mint, vocab.Admission)
			}); n != 0 {
				t.Errorf("%scharging %s allocated %v times per charge, want 0", pool.prefix, what, n)
			}
		}
		if d := l.Charge(context.Background(), extra, vocab.Mint, vocab.Admission); !d.Overflow {
			t.Fatalf("%s: %+v, want the pool at its cap and the charge on its overflow bucket", pool.prefix, d)
		}
	}
}

// TestOverflowBucketsAreSizedPerBucket gives the two buckets different
// bursts and intervals: each overflow bucket admits its own bucket's burst,
// refills at its own interval and reports its own retry-after.
func TestOverflowBucketsAreSizedPerBucket(t *testing.T) {
	const prBurst, admBurst = 2, 7
	prInt, admInt := 3*time.Second, 5*time.Second
	for _, v := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
		l := mustNew(t, cfg(prBurst, prInt, admBurst, admInt), nil)
		saturateDrained(t, l, 0)
		for _, tc := range []struct {
			b        vocab.Bucket
			burst    int
			interval time.Duration
			retry    uint64
		}{{vocab.PredecisionRefusal, prBurst, prInt, 3}, {vocab.Admission, admBurst, admInt, 5}} {
			n := 0
			var last Decision
			for i := range 20 {
				last = chargeChecked(t, l, "absent-"+tc.b.String()+string(rune('a'+i)), v, tc.b, 0)
				if !last.Overflow {
					t.Fatalf("%v/%v: charge %d not on the overflow bucket", v, tc.b, i)
				}
				if !last.Allowed {
					break
				}
				n++
			}
			if n != tc.burst || last.RetryAfterSeconds != tc.retry {
				t.Fatalf("%v/%v overflow admitted %d then retry-after %d; want its own burst %d and interval %d s", v, tc.b, n, last.RetryAfterSeconds, tc.burst, tc.retry)
			}
			at := Instant(tc.interval)
			if d := chargeChecked(t, l, "later-"+tc.b.String(), v, tc.b, at); !d.Allowed {
				t.Fatalf("%v/%v overflow not refilled after its own interval: %+v", v, tc.b, d)
			}
			if d := chargeChecked(t, l, "later2-"+tc.b.String(), v, tc.b, at); d.Allowed {
				t.Fatalf("%v/%v overflow gave two tokens for one interval: %+v", v, tc.b, d)
			}
		}
	}
}
