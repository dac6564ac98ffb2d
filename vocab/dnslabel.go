package vocab

// MaxDNSLabelBytes is the longest DNS label: 63 octets.
const MaxDNSLabelBytes = 63

// IsDNSLabel reports whether s is a DNS label as the registrar spells one:
// 1 to 63 octets of [a-z0-9-], not starting or ending with '-' (lower case
// only, no IDNA). Component names, and the verbs' service names and hosts,
// follow it, since all three are joined into derived registration ids.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > MaxDNSLabelBytes || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
