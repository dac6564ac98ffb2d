package limiter

import (
	"context"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// ChargeAt charges at instant now, for the tests that walk fixed steps with
// no clock at all. It is not part of the package's API: there a charge's
// instant comes from the limiter's clock or a monotonic reading.
func (l *Limiter) ChargeAt(ctx context.Context, identity string, verb vocab.Verb, bucket vocab.Bucket, now Instant) Decision {
	c := l.Caller(identity)
	return l.chargeAt(ctx, &c, verb, bucket, now, time.Time{})
}
