package wire_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// mintWith returns a mint body with member set to the JSON string raw
// (quotes included).
func mintWith(member, raw string) string {
	m := map[string]string{
		"service_name": `"review"`, "host": `"h1"`, "component": `"review"`,
		"spec.component": `"review"`, "spec.service_name": `"review"`, "spec.reload": `"r"`, "idempotency_key": `"k"`,
	}
	m[member] = raw
	return `{"protocol_version":1,"service_name":` + m["service_name"] + `,"host":` + m["host"] + `,"instance":7,"component":` + m["component"] +
		`,"spec":{"component":` + m["spec.component"] + `,"service_name":` + m["spec.service_name"] + `,"reload":` + m["spec.reload"] +
		`},"wrap_ttl":300,"idempotency_key":` + m["idempotency_key"] + `}`
}

func TestEveryStoredMemberIsBoundedAtTheDecoder(t *testing.T) {
	bounds := wire.FieldBounds()
	if len(bounds) != 7 {
		t.Fatalf("%d bounded members, want the 7 stored strings", len(bounds))
	}
	for _, b := range bounds {
		t.Run(b.Member, func(t *testing.T) {
			at := `"` + strings.Repeat("a", b.MaxBytes) + `"`
			if _, err := wire.DecodeMint([]byte(mintWith(b.Member, at))); err != nil {
				t.Fatalf("a value of exactly %d bytes was refused: %v", b.MaxBytes, err)
			}
			over := `"` + strings.Repeat("a", b.MaxBytes+1) + `"`
			_, err := wire.DecodeMint([]byte(mintWith(b.Member, over)))
			want := b.Member + ": longer than " + strconv.Itoa(b.MaxBytes) + " bytes (got " + strconv.Itoa(b.MaxBytes+1) + ")"
			checkRejection(t, err, want)
			// The bound is on the decoded value: an escape counts once.
			escaped := `"` + strings.Repeat(`\u0061`, b.MaxBytes) + `"`
			if _, err := wire.DecodeMint([]byte(mintWith(b.Member, escaped))); err != nil {
				t.Fatalf("%d escaped characters (decoding to %d bytes) were refused: %v", b.MaxBytes, b.MaxBytes, err)
			}
		})
	}
	// Deregister's members go through the same step.
	body := `{"protocol_version":1,"service_name":"review","host":"` + strings.Repeat("h", 256) + `","component":"review"}`
	_, err := wire.DecodeDeregister([]byte(body))
	checkRejection(t, err, "host: longer than 255 bytes (got 256)")
}

func TestFieldBoundsIsACopy(t *testing.T) {
	b := wire.FieldBounds()
	b[0].MaxBytes = 1 << 30
	if wire.FieldBounds()[0].MaxBytes == 1<<30 {
		t.Fatal("FieldBounds exposes the table itself: a caller could raise a bound")
	}
}
