package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// The chain's head, out of the daemon's reach: on every tick where it
// changed, the daemon logs one line (HeadMessage) carrying the head's
// generation, line, epoch and chain value as the attributes named below;
// under systemd it lands in the journal, which the daemon's uid cannot
// rewrite. ReadHeads reads those lines back, as the daemon's JSON or text
// log lines, `journalctl -o cat` output (the same lines) or `journalctl -o
// json` (each entry's MESSAGE field), for `audit verify --heads`.

// HeadMessage is the message of the head's log line.
const HeadMessage = "audit seal head"

// The head's log attributes.
const (
	HeadAttrGeneration = "audit_seal_generation"
	HeadAttrLine       = "audit_seal_line"
	HeadAttrEpoch      = "audit_seal_epoch"
	HeadAttrChain      = "audit_seal_chain"
	HeadAttrKeyID      = "audit_seal_key_id"
)

// HeadAttrs returns the head's log attributes, in the order above.
func (h SealHead) HeadAttrs() []slog.Attr {
	return []slog.Attr{
		slog.Int(HeadAttrGeneration, h.Generation),
		slog.Uint64(HeadAttrLine, h.Line),
		slog.Uint64(HeadAttrEpoch, h.Epoch),
		slog.String(HeadAttrChain, h.Chain),
		slog.String(HeadAttrKeyID, h.KeyID),
	}
}

// HeadLine is one head read back from the log.
type HeadLine struct {
	// Time is the log line's time (zero if it had none).
	Time       time.Time
	Generation int
	Line       uint64
	Epoch      uint64
	Chain      string
	KeyID      string
}

// Heads are the heads read by ReadHeads, reduced to what a verifier
// checks: the head of the highest line of each generation (a chain that
// verifies up to it vouches for every line before), and the newest.
type Heads struct {
	// Read counts the head lines read; Skipped the other lines.
	Read, Skipped uint64
	// Newest is the head of the latest time (the last read among equal
	// times).
	Newest HeadLine
	byGen  map[int]HeadLine
}

// MaxHeadGenerations bounds the generations ReadHeads keeps a head of: a
// store numbers its generations up to 999999.
const MaxHeadGenerations = 1_000_000

// maxHeadLineBytes bounds one log line ReadHeads reads; longer lines are
// skipped.
const maxHeadLineBytes = 1 << 20

// ReadHeads reads head lines from r: every line whose message is
// HeadMessage with the four attributes; other lines are skipped. It keeps
// one head per generation, so its memory is bounded by the generations, not
// the lines. An error is r's, or a head line that names a generation,
// line or chain value the store could not have written.
func ReadHeads(r io.Reader) (*Heads, error) {
	hs := &Heads{byGen: map[int]HeadLine{}}
	br := bufio.NewReaderSize(r, 64<<10)
	var n uint64
	for {
		line, err := readLogLine(br)
		if len(line) > 0 {
			n++
			h, ok, perr := parseHeadLine(line)
			switch {
			case perr != nil:
				return nil, fmt.Errorf("audit: heads: line %d: %w", n, perr)
			case ok:
				if err := hs.add(h); err != nil {
					return nil, fmt.Errorf("audit: heads: line %d: %w", n, err)
				}
			default:
				hs.Skipped++
			}
		}
		if err == io.EOF {
			return hs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("audit: heads: %w", err)
		}
	}
}

// readLogLine reads one line without its '\n'; a line longer than
// maxHeadLineBytes is returned empty (skipped).
func readLogLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxHeadLineBytes {
			buf = append(buf, chunk...)
		} else {
			buf = buf[:0:0]
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

func (hs *Heads) add(h HeadLine) error {
	hs.Read++
	if !h.Time.Before(hs.Newest.Time) || hs.Newest.Chain == "" {
		hs.Newest = h
	}
	if cur, ok := hs.byGen[h.Generation]; ok {
		if h.Line > cur.Line || h.Line == cur.Line && h.Time.After(cur.Time) {
			hs.byGen[h.Generation] = h
		}
		return nil
	}
	if len(hs.byGen) >= MaxHeadGenerations {
		return fmt.Errorf("more than %d generations", MaxHeadGenerations)
	}
	hs.byGen[h.Generation] = h
	return nil
}

// Len returns how many generations the heads name.
func (hs *Heads) Len() int {
	if hs == nil {
		return 0
	}
	return len(hs.byGen)
}

// parseHeadLine reads one log line: a JSON object (the daemon's JSON
// handler, or a journal entry whose MESSAGE is a log line) or a text
// handler's key=value line, optionally after a journal priority prefix
// ("<6>").
func parseHeadLine(line []byte) (HeadLine, bool, error) {
	line = bytes.TrimSpace(line)
	if len(line) >= 3 && line[0] == '<' && line[2] == '>' && line[1] >= '0' && line[1] <= '7' {
		line = line[3:]
	}
	if len(line) > 0 && line[0] == '{' {
		return parseHeadJSON(line)
	}
	return parseHeadText(line)
}

func parseHeadJSON(line []byte) (HeadLine, bool, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return HeadLine{}, false, nil
	}
	if raw, ok := m["MESSAGE"]; ok { // a journal entry
		var msg string
		if json.Unmarshal(raw, &msg) != nil {
			return HeadLine{}, false, nil // a binary MESSAGE: not ours
		}
		return parseHeadLine([]byte(msg))
	}
	var msg string
	if json.Unmarshal(m["msg"], &msg) != nil || msg != HeadMessage {
		return HeadLine{}, false, nil
	}
	get := func(k string) string {
		raw, ok := m[k]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw) // a number
	}
	return headFrom(get)
}

func parseHeadText(line []byte) (HeadLine, bool, error) {
	attrs := logfmt(line)
	if attrs["msg"] != HeadMessage {
		return HeadLine{}, false, nil
	}
	return headFrom(func(k string) string { return attrs[k] })
}

// headFrom builds a head from its attributes (get returns "" for one
// missing).
func headFrom(get func(string) string) (HeadLine, bool, error) {
	var h HeadLine
	gen, err := strconv.ParseUint(get(HeadAttrGeneration), 10, 32)
	if err != nil || gen > maxSequence {
		return h, false, fmt.Errorf("%s %q is not a generation number (0 to %d)", HeadAttrGeneration, get(HeadAttrGeneration), maxSequence)
	}
	h.Generation = int(gen)
	if h.Line, err = strconv.ParseUint(get(HeadAttrLine), 10, 64); err != nil || h.Line == 0 {
		return h, false, fmt.Errorf("%s %q is not a line number", HeadAttrLine, get(HeadAttrLine))
	}
	if h.Epoch, err = strconv.ParseUint(get(HeadAttrEpoch), 10, 64); err != nil {
		return h, false, fmt.Errorf("%s %q is not an epoch", HeadAttrEpoch, get(HeadAttrEpoch))
	}
	h.Chain = get(HeadAttrChain)
	if !isLowerHex(h.Chain, ChainHexLen) {
		return h, false, fmt.Errorf("%s %q is not 32 lowercase hex digits", HeadAttrChain, h.Chain)
	}
	h.KeyID = get(HeadAttrKeyID)
	if t := get("time"); t != "" {
		h.Time, _ = time.Parse(time.RFC3339Nano, t)
	}
	return h, true, nil
}

// logfmt reads slog's text handler's key=value pairs (a value quoted with
// Go's quoting when it needs it).
func logfmt(line []byte) map[string]string {
	out := map[string]string{}
	s := string(line)
	for len(s) > 0 {
		for len(s) > 0 && s[0] == ' ' {
			s = s[1:]
		}
		eq := 0
		for eq < len(s) && s[eq] != '=' && s[eq] != ' ' {
			eq++
		}
		if eq >= len(s) || s[eq] != '=' {
			// A word without a value: skip it.
			for len(s) > 0 && s[0] != ' ' {
				s = s[1:]
			}
			continue
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if len(s) > 0 && s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return out
			}
			val, _ = strconv.Unquote(q)
			s = s[len(q):]
		} else {
			end := 0
			for end < len(s) && s[end] != ' ' {
				end++
			}
			val, s = s[:end], s[end:]
		}
		out[key] = val
	}
	return out
}

// headIndex checks the heads during Verify's walk.
type headIndex struct {
	heads   *Heads
	checked map[int]bool
	lines   map[int]uint64 // lines read per generation present
	files   map[int]string // generation → file
	oldest  int            // the oldest generation present, -1 if none
}

func newHeadIndex(hs *Heads) *headIndex {
	return &headIndex{heads: hs, checked: map[int]bool{}, lines: map[int]uint64{}, files: map[int]string{}, oldest: -1}
}

// fileRead notes a file's generation and how many lines it held.
func (hx *headIndex) fileRead(gen int, name string, lines uint64) {
	hx.lines[gen], hx.files[gen] = lines, name
}

// at checks a chained line against its generation's head.
func (hx *headIndex) at(cv *chainVerifier, name string, lineNo, epoch uint64, c chainValue) {
	if hx.heads.Len() == 0 {
		return
	}
	g := cv.genOf(name)
	h, ok := hx.heads.byGen[g]
	if !ok || h.Line != lineNo {
		return
	}
	hx.checked[g] = true
	cv.rep.HeadsChecked++
	switch {
	case h.Chain != c.hexString():
		cv.v.problem(VerifyHeadMismatch, name, lineNo, fmt.Sprintf(
			"has chain value %s, but the head logged%s recorded %s for this line: the store was rewritten after the head was logged", c.hexString(), headWhen(h), h.Chain))
	case h.Epoch != epoch:
		cv.v.problem(VerifyHeadMismatch, name, lineNo, fmt.Sprintf(
			"is in epoch %d, but the head logged%s recorded epoch %d for it: the store's seals were rewritten after the head was logged", epoch, headWhen(h), h.Epoch))
	}
}

// finish reports the heads whose line was not found: a file cut short, or
// a generation gone.
func (hx *headIndex) finish(cv *chainVerifier) {
	if hx.heads.Len() == 0 {
		return
	}
	for g, h := range hx.heads.byGen {
		if hx.checked[g] {
			continue
		}
		name, present := hx.files[g]
		switch {
		case present && hx.lines[g] < h.Line:
			cv.v.problem(VerifyTruncated, name, hx.lines[g], fmt.Sprintf(
				"ends at line %d, but the head logged%s recorded line %d of it (chain value %s): the file's tail was cut", hx.lines[g], headWhen(h), h.Line, h.Chain))
		case present:
			cv.v.problem(VerifyHeadMismatch, name, h.Line, fmt.Sprintf(
				"is not a chained line, but the head logged%s recorded chain value %s for it: the store was rewritten after the head was logged", headWhen(h), h.Chain))
		case g > hx.oldest: // newer than the oldest kept (-1 with none kept): not retention's
			cv.v.problem(VerifyGenerationMissing, fmt.Sprintf("%s*-%06d%s", generationPrefix, g, generationSuffix), 0, fmt.Sprintf(
				"is gone, but the head logged%s recorded line %d of generation %d (chain value %s), newer than the oldest generation kept: a generation deleted outside retention", headWhen(h), h.Line, g, h.Chain))
		}
	}
}

func headWhen(h HeadLine) string {
	if h.Time.IsZero() {
		return ""
	}
	return " at " + h.Time.UTC().Format(TimeLayout)
}
