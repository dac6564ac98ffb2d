package limiter

import (
	"context"
	"time"
)

// ChargeAt charges at instant now, for the tests that walk fixed steps with
// no clock at all. It is not part of the package's API: there a charge's
// instant comes from the limiter's clock or a monotonic reading.
func (l *Limiter) ChargeAt(ctx context.Context, identity string, verb Verb, bucket Bucket, now Instant) Decision {
	return l.chargeAt(ctx, identity, verb, bucket, now, time.Time{})
}
