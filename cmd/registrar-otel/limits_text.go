package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// printLimits writes a limits show answer as text: one block per identity
// (a heading, then a table of its buckets, each shadow bucket below its
// bucket), then one block per pool's overflow buckets.
func printLimits(w io.Writer, ans *wire.LimitsAnswer) {
	if len(ans.Identities) == 0 {
		fmt.Fprintln(w, "no identity has an entry in the limiter's map")
	}
	for i, il := range ans.Identities {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  (policy %s, pool %s)\n", printable(il.Identity), printable(il.Policy), printable(string(il.Pool)))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  verb\tbucket\tstate\ttokens/burst\trefill\tretry after")
		for _, k := range il.Buckets {
			bucketRow(tw, k.Verb.String(), k.Bucket.String(), k.BucketLimits)
			if k.Shadow != nil {
				bucketRow(tw, "", "(shadow)", *k.Shadow)
			}
		}
		tw.Flush()
	}
	for _, po := range ans.Overflow {
		fmt.Fprintf(w, "\noverflow buckets of the %s pool  (%d of %d entries)\n", printable(string(po.Pool)), po.Entries, po.MaxEntries)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  policy\tverb\tbucket\ttokens/burst\trefill\tretry after")
		for _, b := range po.Buckets {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d/%d\t%s\t%s\n", printable(b.Policy), b.Verb, b.Bucket, b.Tokens, b.Burst, refill(b.RefillIntervalMS), retryAfter(b.RetryAfterSeconds))
		}
		tw.Flush()
	}
}

func bucketRow(tw io.Writer, verb, bucket string, b wire.BucketLimits) {
	fmt.Fprintf(tw, "  %s\t%s\t%s\t%d/%d\t%s\t%s\n", verb, bucket, printable(string(b.State)), b.Tokens, b.Burst, refill(b.RefillIntervalMS), retryAfter(b.RetryAfterSeconds))
}

// printLimitsReset writes a limits reset answer as text: a heading, then
// one line per key reset with its tokens before and after.
func printLimitsReset(w io.Writer, ans *wire.LimitsResetAnswer) {
	recorded := "recorded in the audit store"
	if !ans.Recorded {
		recorded = "NOT recorded in the audit store"
	}
	fmt.Fprintf(w, "reset %s  (policy %s, pool %s): %d bucket(s), %s\n", printable(ans.Identity), printable(ans.Policy), printable(string(ans.Pool)), len(ans.Reset), recorded)
	if len(ans.Reset) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  verb\tbucket\tbefore\ttokens\tshadow tokens")
	for _, k := range ans.Reset {
		shadow := "-"
		if k.ShadowTokens != nil {
			shadow = strconv.FormatUint(uint64(*k.ShadowTokens), 10)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d -> %d\t%s\n", k.Verb, k.Bucket, printable(string(k.Before)), k.TokensBefore, k.Tokens, shadow)
	}
	tw.Flush()
}

// refill is a refill interval as a duration (500ms, 1m0s); one too long
// for a time.Duration in milliseconds.
func refill(ms uint64) string {
	if ms > math.MaxInt64/uint64(time.Millisecond) {
		return strconv.FormatUint(ms, 10) + "ms"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// retryAfter is "now" for a bucket holding a token, else the seconds.
func retryAfter(s uint64) string {
	if s == 0 {
		return "now"
	}
	return strconv.FormatUint(s, 10) + "s"
}
