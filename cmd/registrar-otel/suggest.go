package main

import (
	"fmt"
	"strings"
)

// suggest returns the option s is most likely a misspelling of: equal
// but for case, '-' and '_', or at most two edits away (an insertion, a
// deletion, a substitution or a swap of neighbours), and no further than a
// third of its length. It returns "" when no option is that close.
func suggest(s string, options []string) string {
	norm := func(x string) string {
		return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(x))
	}
	best, bestD := "", 3
	for _, o := range options {
		if o == s {
			return ""
		}
		d := editDistance(norm(s), norm(o))
		if d < bestD && d <= max(1, len(o)/3) {
			best, bestD = o, d
		}
	}
	return best
}

// didYouMean is "; did you mean X?" for suggest's answer, or "".
func didYouMean(s string, options []string) string {
	if m := suggest(s, options); m != "" {
		return fmt.Sprintf("; did you mean %s?", m)
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b over
// bytes: insertions, deletions, substitutions and adjacent swaps.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
