package vaulttest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"sync"
	"testing"
	"time"
)

// Fault is what a Proxy does with a request a Rule matches.
type Fault uint8

const (
	// Pass forwards the request and sends the answer back: what the proxy
	// does with every request no rule matches.
	Pass Fault = iota
	// Fail500 answers 500 without forwarding: the server never sees the
	// request.
	Fail500
	// Fail500Applied forwards the request, lets the server apply it, and
	// answers 500 instead of the server's answer: a server whose write
	// succeeded and whose answer failed.
	Fail500Applied
	// Delay forwards the request, lets the server apply it, and holds the
	// answer for Rule.Hold (0: until the client gives up, the rule's
	// Release, or the test ends) before sending it. A client that gives up
	// first gets nothing.
	Delay
	// Drop forwards the request, lets the server apply it, holds the
	// answer for Rule.Hold (0: not at all) or until the client gives up,
	// and then closes the connection without an answer.
	Drop
)

var faultNames = [...]string{Pass: "pass", Fail500: "fail500", Fail500Applied: "fail500-applied", Delay: "delay", Drop: "drop"}

// String returns the fault's name, e.g. "fail500-applied".
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "Fault(?)"
}

// Request is one request the proxy saw.
type Request struct {
	Method string
	// Path is the URL path, e.g. /v1/secret/data/registrar-otel/bindings/ID.
	Path string
}

func (r Request) String() string { return r.Method + " " + r.Path }

// Rule selects requests and the fault applied to them.
type Rule struct {
	// Method matches the request's method; "" matches any.
	Method string
	// Path is a path.Match pattern on the URL path; "" matches any.
	Path string
	// Nth, when at least 1, applies the fault only to the Nth request the
	// rule matches (counted from when it was added), once; 0 applies it
	// to every matching request.
	Nth int
	// Fault is what is done with the selected requests.
	Fault Fault
	// Hold is how long Delay and Drop hold the answer; see each.
	Hold time.Duration
}

// Injection is one rule added to a Proxy.
type Injection struct {
	rule    Rule
	matched int
	fired   chan Request  // one per request the fault was applied to, once the server answered it (or, for Fail500, at once)
	release chan struct{} // closed by Release
	once    sync.Once
}

// Fired receives each request the fault was applied to: for the faults
// that forward, once the server has answered it (so what it did is done),
// before the answer is held, replaced or dropped. It is buffered (64);
// notifications beyond that are discarded.
func (in *Injection) Fired() <-chan Request { return in.fired }

// Release ends every hold of this injection at once (a held Delay then
// sends its answer, a held Drop closes the connection).
func (in *Injection) Release() { in.once.Do(func() { close(in.release) }) }

// Proxy is a loopback HTTP reverse proxy in front of a server (normally a
// Server's Addr) that records every request and applies the faults of its
// rules. The first rule that selects a request decides; requests no rule
// selects pass. It is closed when the test ends, after every hold is
// released. Safe for concurrent use.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.1:PORT.
	URL string

	rp    *httputil.ReverseProxy
	done  chan struct{} // closed at the test's end: every hold ends
	mu    sync.Mutex
	seen  []Request
	rules []*Injection
}

// NewProxy starts a proxy on a loopback port in front of target (an
// http:// URL). A dead target looks like a dead server: the client's
// connection is closed without an answer.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		t.Fatalf("vaulttest.NewProxy: target %q is not an http:// URL", target)
	}
	p := &Proxy{rp: httputil.NewSingleHostReverseProxy(u), done: make(chan struct{})}
	p.rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(errUpstream) }
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	// Cleanups run last-in first-out: the holds end, then the server
	// closes (which waits for its handlers).
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.done) })
	p.URL = srv.URL
	return p
}

// errUpstream is the status the error handler records when the target did
// not answer; serve turns it into a dropped connection.
const errUpstream = 599

// Add adds a rule after the existing ones and returns its injection.
func (p *Proxy) Add(r Rule) *Injection {
	in := &Injection{rule: r, fired: make(chan Request, 64), release: make(chan struct{})}
	p.mu.Lock()
	p.rules = append(p.rules, in)
	p.mu.Unlock()
	return in
}

// Reset removes every rule and releases their holds; later requests pass.
func (p *Proxy) Reset() {
	p.mu.Lock()
	rules := p.rules
	p.rules = nil
	p.mu.Unlock()
	for _, in := range rules {
		in.Release()
	}
}

// Requests returns every request the proxy has seen, in order of arrival.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// Count returns how many requests the proxy has seen.
func (p *Proxy) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// selectRule records req and returns the injection that selects it, or
// nil.
func (p *Proxy) selectRule(req Request) *Injection {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, req)
	for _, in := range p.rules {
		r := in.rule
		if r.Method != "" && r.Method != req.Method {
			continue
		}
		if r.Path != "" {
			if ok, err := path.Match(r.Path, req.Path); err != nil || !ok {
				continue
			}
		}
		in.matched++
		if r.Nth == 0 || in.matched == r.Nth {
			return in
		}
	}
	return nil
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.Path}
	in := p.selectRule(req)
	if in == nil || in.rule.Fault == Pass {
		rec := p.forward(r)
		copyAnswer(w, rec)
		return
	}
	if in.rule.Fault == Fail500 {
		notify(in, req)
		fail500(w)
		return
	}
	rec := p.forward(r)
	notify(in, req)
	switch in.rule.Fault {
	case Fail500Applied:
		fail500(w)
	case Delay:
		p.hold(r, in, in.rule.Hold, true)
		if r.Context().Err() == nil {
			copyAnswer(w, rec)
		}
	case Drop:
		if in.rule.Hold > 0 {
			p.hold(r, in, in.rule.Hold, false)
		}
		drop(w)
	}
}

// forward sends r to the target and returns its answer. The upstream
// request does not end when the client gives up: what the server was sent
// is applied, as on a real network where the client's timeout does not
// reach the server.
func (p *Proxy) forward(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
	return rec
}

// hold waits until d passes (d == 0 and forever: no timer), the client
// gives up, the injection is released or the test ends.
func (p *Proxy) hold(r *http.Request, in *Injection, d time.Duration, forever bool) {
	var timeout <-chan time.Time
	if d > 0 || !forever {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-r.Context().Done():
	case <-in.release:
	case <-p.done:
	}
}

func notify(in *Injection, req Request) {
	select {
	case in.fired <- req:
	default:
	}
}

func copyAnswer(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	if rec.Code == errUpstream {
		drop(w)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = io.Copy(w, rec.Body)
}

func fail500(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write([]byte(`{"errors":["injected by the vaulttest proxy"]}`))
}

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
