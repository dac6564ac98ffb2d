package logthrottle

// Allow is Log's decision without the line, for a caller that writes the
// line itself (with its own attribute order): it reports whether a line of
// key is to be emitted now and, if so, how many lines of key were
// suppressed since the previous one emitted; otherwise it counts this one
// as suppressed. Unlike Log it does not consult the logger's level: every
// call is decided and counted. Safe for concurrent use.
func (t *Throttle) Allow(key string) (suppressed uint64, ok bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	c, fresh := t.causeOf(key, now)
	if !fresh && !t.elapsed(c, now) {
		c.suppressed++
		return 0, false
	}
	suppressed = c.suppressed
	c.last, c.suppressed = now, 0
	return suppressed, true
}
