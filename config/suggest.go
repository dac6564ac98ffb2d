package config

import (
	"strings"
)

// SuggestKey returns the key this version knows that an unknown dotted key
// is most likely a misspelling of: one edit away (a character inserted,
// deleted, replaced, or two neighbours swapped) or differing only in case,
// with the same number of levels. Table names count as keys
// ("registar" suggests "registrar"), and a component's name matches any
// name ("registrar.components.review.multiplicty" suggests
// "registrar.components.review.multiplicity"). It returns "" when no known
// key is that close. Load logs the suggestion with the unknown-key warning
// as the attribute "did_you_mean". SuggestKey is safe for concurrent use.
func SuggestKey(key string) string {
	segs := strings.Split(key, ".")
	for _, known := range suggestCandidates() {
		ks := strings.Split(known, ".")
		if len(ks) != len(segs) {
			continue
		}
		for i := range ks {
			if ks[i] == "<name>" {
				ks[i] = segs[i]
			}
		}
		cand := strings.Join(ks, ".")
		if cand != key && (strings.EqualFold(cand, key) || oneEdit(cand, key)) {
			return cand
		}
	}
	return ""
}

// suggestCandidates is every known key and every table that holds one.
func suggestCandidates() []string {
	keys := Keys()
	seen := map[string]bool{}
	out := append([]string(nil), keys...)
	for _, k := range keys {
		for i := strings.LastIndexByte(k, '.'); i > 0; i = strings.LastIndexByte(k[:i], '.') {
			if t := k[:i]; !seen[t] && !strings.HasSuffix(t, "<name>") {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// oneEdit reports whether a and b (which differ) are one edit apart:
// an insertion, a deletion, a substitution, or a transposition of two
// adjacent characters (Damerau–Levenshtein distance 1), over bytes.
func oneEdit(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	switch len(a) - len(b) {
	case 0:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		if i == len(a) {
			return false // equal
		}
		if a[i+1:] == b[i+1:] {
			return true // substitution
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case 1:
		i := 0
		for i < len(b) && a[i] == b[i] {
			i++
		}
		return a[i+1:] == b[i:]
	}
	return false
}

// EnvVarOf is the environment variable that sets a dotted key:
// registrar.rate_limit_admission_burst is
// REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST.
func EnvVarOf(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", envDelim))
}

// SuggestEnvVar returns the variable an unknown REGISTRAR_OTEL_ variable
// most likely meant: the spelling with "__" between the levels of a known
// key where the name has a single "_" (or three), as in
// REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST for
// REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST. It returns "" when
// no known key reads that way. Component keys are not suggested (their
// names are free).
func SuggestEnvVar(name string) string {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	if !ok {
		return ""
	}
	flat := func(s string) string {
		return strings.NewReplacer("_", "", ".", "").Replace(strings.ToLower(s))
	}
	want := flat(rest)
	for _, k := range Keys() {
		if strings.Contains(k, "<name>") {
			continue
		}
		if flat(k) == want && EnvVarOf(k) != name {
			return EnvVarOf(k)
		}
	}
	return ""
}
