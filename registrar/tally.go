package registrar

import (
	"sync"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// tally is the verbs' count of live registrations, what the instance
// ceilings bound: one entry per registration id the registry holds (or, after
// a partial failure, may hold), each with its component, host and owner, and
// the counts derived from the entries, kept in step with them. It lives in
// memory only: Verbs.Rebuild fills it from the registry (at start, so a
// crash loses nothing), and the verbs keep it in step under the
// registration id's lock.
//
// Keying by registration id, not keeping bare counters, is what makes every
// update idempotent: a mint that reserves the same id twice (a re-run
// transaction, a retry after a partial failure) holds one slot, a
// deregister of an id counted nowhere frees nothing, and a Rebuild can
// replay the changes made while it listed.
//
// Its lock is a leaf: held for map updates only, never across a backend
// call or a record write, and it may be taken inside a backend's
// transaction (Reserve).
type tally struct {
	mu sync.Mutex
	s  *tallyState
	// pending holds the reservations made and not yet settled: the mints
	// the backend may be creating right now. A Rebuild carries them over,
	// since its listing may have missed a binding created after it read.
	pending map[string]tallyEntry
	// journaling is set while a Rebuild lists the registry; journal then
	// records, in order, the state every change left an id in, which the
	// Rebuild applies over its listing.
	journaling bool
	journal    []tallyEvent
}

// tallyEntry is one registration: its spec's component, host and owner,
// and the owner's policy under the state's authority (-1: none, an
// operator's, or an unowned registration).
type tallyEntry struct {
	component, host, owner string
	policy                 int
}

func (e tallyEntry) same(o tallyEntry) bool {
	return e.component == o.component && e.host == o.host && e.owner == o.owner
}

// tallyEvent is the state a change left id in: present with e, or absent.
type tallyEvent struct {
	id      string
	e       tallyEntry
	present bool
}

type hostKey struct{ component, host string }

// componentTally is one component's counts: its live registrations and how
// many hosts hold each number of them, so that the busiest host is known
// in O(1) as registrations come and go.
type componentTally struct {
	live uint64
	// hostsAt[k] is how many hosts hold exactly k live registrations of
	// the component (index 0 unused).
	hostsAt []uint64
	busiest uint32
}

// tallyState is the entries and their counts, under one authority.
type tallyState struct {
	entries  map[string]tallyEntry
	hosts    map[hostKey]uint32
	comps    map[string]*componentTally
	policies map[int]uint64
	// auth is the authority the policies are counted under: the pointer
	// Verbs.SetAuthority stored, so a new one (even an equal one) is
	// noticed; nil for none.
	auth *Authority
}

func newTallyState(auth *Authority) *tallyState {
	return &tallyState{
		entries:  map[string]tallyEntry{},
		hosts:    map[hostKey]uint32{},
		comps:    map[string]*componentTally{},
		policies: map[int]uint64{},
		auth:     auth,
	}
}

// policyOf is owner's policy under auth, -1 for none: no authority, an
// unowned registration (the operators'), an operator's identity, or one
// that matches no policy (its policy was removed).
func policyOf(auth *Authority, owner string) int {
	if auth == nil || owner == "" {
		return -1
	}
	p, ok := (*auth).Policy(owner)
	if !ok || p < 0 {
		return -1
	}
	return p
}

// add counts e as id's; id must not be counted.
func (s *tallyState) add(id string, e tallyEntry) {
	e.policy = policyOf(s.auth, e.owner)
	s.entries[id] = e
	k := hostKey{e.component, e.host}
	n := s.hosts[k] + 1
	s.hosts[k] = n
	c := s.comps[e.component]
	if c == nil {
		c = &componentTally{}
		s.comps[e.component] = c
	}
	c.live++
	if n > 1 {
		c.hostsAt[n-1]--
	}
	for uint32(len(c.hostsAt)) <= n {
		c.hostsAt = append(c.hostsAt, 0)
	}
	c.hostsAt[n]++
	c.busiest = max(c.busiest, n)
	if e.policy >= 0 {
		s.policies[e.policy]++
	}
}

// remove uncounts id, if counted.
func (s *tallyState) remove(id string) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	delete(s.entries, id)
	k := hostKey{e.component, e.host}
	n := s.hosts[k]
	if n <= 1 {
		delete(s.hosts, k)
	} else {
		s.hosts[k] = n - 1
	}
	c := s.comps[e.component]
	c.live--
	c.hostsAt[n]--
	if n > 1 {
		c.hostsAt[n-1]++
	}
	// The host just decremented holds n-1, so the busiest is n-1 when no
	// host holds n any more.
	if n == c.busiest && c.hostsAt[n] == 0 {
		c.busiest = n - 1
	}
	if e.policy >= 0 {
		if s.policies[e.policy]--; s.policies[e.policy] == 0 {
			delete(s.policies, e.policy)
		}
	}
}

// under recounts the policies under auth, if they are counted under
// another: after a reload of the caller policies, once (an owner may now
// take another policy, or none).
func (s *tallyState) under(auth *Authority) {
	if s.auth == auth {
		return
	}
	s.auth = auth
	clear(s.policies)
	for id, e := range s.entries {
		e.policy = policyOf(auth, e.owner)
		s.entries[id] = e
		if e.policy >= 0 {
			s.policies[e.policy]++
		}
	}
}

// under recounts the policies under auth now (SetAuthority), if there are
// counts yet.
func (t *tally) under(auth *Authority) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.s != nil {
		t.s.under(auth)
	}
}

// record journals id's state when a Rebuild is listing.
func (t *tally) record(id string, e tallyEntry, present bool) {
	if t.journaling {
		t.journal = append(t.journal, tallyEvent{id, e, present})
	}
}

// reserve takes a slot for id, which the backend found unbound and is
// about to create: e's, of owner policy under auth. Any entry id had is
// stale (there is no binding) and goes first. It returns the ceiling that
// refuses it and that ceiling's value, or 0 when the slot is taken:
// perHost bounds e's (component, host) and perPolicy e's policy (0: no
// ceiling), checked in that order.
func (t *tally) reserve(id string, e tallyEntry, auth *Authority, perHost, perPolicy uint32) (vocab.Ceiling, uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.under(auth)
	if _, ok := s.entries[id]; ok {
		s.remove(id)
		t.record(id, tallyEntry{}, false)
	}
	delete(t.pending, id)
	if perHost != 0 && s.hosts[hostKey{e.component, e.host}] >= perHost {
		return vocab.CeilingInstancesPerHost, perHost
	}
	if p := policyOf(auth, e.owner); perPolicy != 0 && p >= 0 && s.policies[p] >= uint64(perPolicy) {
		return vocab.CeilingRegistrations, perPolicy
	}
	s.add(id, e)
	t.pending[id] = e
	t.record(id, e, true)
	return 0, 0
}

// set counts id as e's (the backend created it, or may have), replacing
// whatever id had, and settles its reservation.
func (t *tally) set(id string, e tallyEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, id)
	if old, ok := t.s.entries[id]; !ok || !old.same(e) {
		t.s.remove(id)
		t.s.add(id, e)
	}
	t.record(id, e, true)
}

// clear uncounts id (the backend has no binding for it) and settles its
// reservation.
func (t *tally) clear(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, id)
	t.s.remove(id)
	t.record(id, tallyEntry{}, false)
}

// beginRebuild starts journaling, before a Rebuild's listing reads
// anything.
func (t *tally) beginRebuild() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.journaling, t.journal = true, nil
}

// abortRebuild stops journaling; the counts stay as they were.
func (t *tally) abortRebuild() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.journaling, t.journal = false, nil
}

// finishRebuild puts s, built from a listing, in force: the changes the
// verbs made while it listed are applied over it, in order, and the
// reservations still pending are carried over (the listing may have read
// before their binding was created). Only the journal and the pending
// reservations are replayed under the lock, not the listing.
func (t *tally) finishRebuild(s *tallyState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range t.journal {
		s.remove(ev.id)
		if ev.present {
			s.add(ev.id, ev.e)
		}
	}
	for id, e := range t.pending {
		if old, ok := s.entries[id]; !ok || !old.same(e) {
			s.remove(id)
			s.add(id, e)
		}
	}
	t.s = s
	t.journaling, t.journal = false, nil
}
