package callers

import "strings"

// radix is a compressed trie over the policies' exact identities and
// prefixes together. Each node holds the edge label that leads into it
// (the root's is empty); an exact identity or a prefix ends at the node
// whose path from the root spells it. The nodes live in one slice and
// point at their children by index, so a lookup touches one array.
//
// Why hand-written: the standard library has no prefix index, and the
// rule as written (a linear scan: every exact identity, then every
// prefix) grows with the number of policies. Measured by BenchmarkMatch
// (1,024 policies, half exact and half prefixes; 2-core VM shared with
// other builds, CPU time per lookup): 35 to 45 ns for an exact or a
// prefix hit, 17 ns for a miss that leaves the trie early, 45 to 55 ns
// for one that walks down to an exact identity first, 0 allocations;
// the linear scan of the same policies, measured in the same run, takes
// 1.1 to 5.3 µs.
type radix struct {
	nodes []node
}

// node is one node of the trie.
type node struct {
	// label is the edge into the node: never empty but at the root.
	label string
	// first holds the first byte of each child's label, ascending; kids
	// the children's indices in nodes, in the same order. Two children
	// never share a first byte.
	first string
	kids  []int32
	// exact and prefix are one more than the index of the policy whose
	// identity, or prefix, the node's path spells; 0 for none.
	exact, prefix int32
}

func newRadix() *radix { return &radix{nodes: []node{{}}} }

// insert records that policy p names key, exactly or as a prefix. It
// returns the policy that already names key the same way and false, or
// -1 and true when the key was new.
func (t *radix) insert(key string, prefix bool, p int32) (int32, bool) {
	n := int32(0)
	for key != "" {
		i := strings.IndexByte(t.nodes[n].first, key[0])
		if i < 0 {
			leaf := t.add(key)
			t.link(n, leaf)
			n = leaf
			break
		}
		c := t.nodes[n].kids[i]
		label := t.nodes[c].label
		common := commonPrefix(key, label)
		if common < len(label) {
			// Split the edge: a new node for the shared part, with c
			// below it holding the rest of its label.
			mid := t.add(label[:common])
			t.nodes[n].kids[i] = mid
			t.nodes[c].label = label[common:]
			t.link(mid, c)
			c = mid
		}
		n, key = c, key[common:]
	}
	slot := &t.nodes[n].exact
	if prefix {
		slot = &t.nodes[n].prefix
	}
	if *slot != 0 {
		return *slot - 1, false
	}
	*slot = p + 1
	return -1, true
}

// add appends a node with the given label and returns its index.
func (t *radix) add(label string) int32 {
	t.nodes = append(t.nodes, node{label: label})
	return int32(len(t.nodes) - 1)
}

// link makes c a child of n, keeping first in ascending order.
func (t *radix) link(n, c int32) {
	p := &t.nodes[n]
	b := t.nodes[c].label[0]
	i := 0
	for i < len(p.first) && p.first[i] < b {
		i++
	}
	p.first = p.first[:i] + string(b) + p.first[i:]
	p.kids = append(p.kids, 0)
	copy(p.kids[i+1:], p.kids[i:])
	p.kids[i] = c
}

// lookup returns the policy whose exact identity is id, else the one whose
// prefix is the longest that id starts with, else -1.
func (t *radix) lookup(id string) int32 {
	best := int32(0)
	n := &t.nodes[0]
	for {
		if n.prefix != 0 {
			best = n.prefix
		}
		if id == "" {
			if n.exact != 0 {
				return n.exact - 1
			}
			return best - 1
		}
		i := child(n.first, id[0])
		if i < 0 {
			return best - 1
		}
		c := &t.nodes[n.kids[i]]
		if !hasLabel(id, c.label) {
			return best - 1
		}
		id = id[len(c.label):]
		n = c
	}
}

// child is the index of b in first (ascending bytes), or -1. Most nodes
// have a few children: a loop the compiler keeps inline beats the call to
// strings.IndexByte there; a wide node takes IndexByte's vector scan.
func child(first string, b byte) int {
	if len(first) > 8 {
		return strings.IndexByte(first, b)
	}
	for i := 0; i < len(first); i++ {
		if first[i] == b {
			return i
		}
	}
	return -1
}

// hasLabel reports whether id starts with label, whose first byte child
// has already matched. Short labels are compared in a loop, long ones by
// the runtime's vector compare.
func hasLabel(id, label string) bool {
	if len(id) < len(label) {
		return false
	}
	if len(label) > 8 {
		return id[1:len(label)] == label[1:]
	}
	for i := 1; i < len(label); i++ {
		if id[i] != label[i] {
			return false
		}
	}
	return true
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
