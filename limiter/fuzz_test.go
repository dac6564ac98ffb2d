package limiter

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// FuzzLimiterInvariants drives a limiter with arbitrary traffic: identities
// from a pool larger than the cap, both verbs and buckets, time stepping
// forwards and backwards. After every charge: tokens stay within
// [0, burst], the map stays within MaxEntries, no entry below full was
// removed, a limited charge has retry-after ≥ 1 s, and nothing panics.
func FuzzLimiterInvariants(f *testing.F) {
	f.Add([]byte{3, 10, 5, 1, 0, 0, 0, 0, 1, 1, 0, 10, 2, 0, 255, 255})
	f.Add([]byte{1, 1, 1, 1, 7, 3, 0x80, 0x00, 9, 2, 0x7f, 0xff})
	f.Add([]byte{8, 200, 2, 50, 0, 0, 1, 0, 0, 1, 1, 0, 0, 2, 1, 0, 0, 3, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		prBurst := uint32(data[0]%8) + 1
		prInterval := time.Duration(data[1]) * 7 * time.Millisecond
		admBurst := uint32(data[2]%8) + 1
		admInterval := time.Duration(data[3]) * 13 * time.Millisecond
		l, err := New(cfg(prBurst, prInterval, admBurst, admInterval), nil)
		if prInterval == 0 || admInterval == 0 {
			if err == nil {
				t.Fatal("New accepted a zero interval")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		now := Instant(0)
		for ops := data[4:]; len(ops) >= 4; ops = ops[4:] {
			id := "id" + strconv.Itoa(int(ops[0])*3%301)
			v := vocab.Verb(ops[1] & 1)
			b := vocab.Bucket(ops[1] >> 1 & 1)
			// A signed step in milliseconds: negative steps present an
			// instant earlier than the last one.
			step := int16(binary.BigEndian.Uint16(ops[2:4]))
			now += Instant(step) * Instant(time.Millisecond)
			chargeChecked(t, l, id, v, b, now)
		}
	})
}
