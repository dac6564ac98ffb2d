package main

// End to end, issue 40: a store sealed by the real binary (audit seal
// init, then serve), tampered with in each of the ten ways the issue
// names, is reported by `audit verify --key` (with the daemon's own log as
// --heads where the chain alone cannot see it), naming the first bad
// record; the untouched store verifies. The intruder of the forged-line
// and rewritten-generation cases holds the key file as it was when the
// daemon stopped, and chains with HMAC-SHA256 as the format says, written
// here independently of the store's code.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// sealedDaemon is a configuration whose state directory holds a sealing
// key made by the binary's `audit seal init`, and the verification key it
// printed. The daemon is not started.
type sealedDaemon struct {
	*daemonProc
	key, stateDir string
	logs          bytes.Buffer // the daemon's log of every run so far
}

func newSealedDaemon(t *testing.T, registrarExtra string) *sealedDaemon {
	t.Helper()
	bin := buildBinary(t)
	dir := shortTempDir(t)
	d := &sealedDaemon{daemonProc: &daemonProc{t: t, bin: bin, dir: dir}}
	d.socket, d.stateDir, d.auditDir = daemonPaths(dir)
	d.config = writeConfig(t, dir, serveDoc(dir, registrarExtra, "metrics_listen = \"127.0.0.1:0\"\n"), 0o600)
	code, out, errOut := d.run("audit", "seal", "init", "--config", d.config, "--json")
	var init struct {
		VerificationKey string `json:"verification_key"`
		KeyFile         string `json:"key_file"`
	}
	if err := json.Unmarshal([]byte(out), &init); err != nil || code != exitOK || init.KeyFile != filepath.Join(d.stateDir, audit.SealKeyFileName) {
		t.Fatalf("audit seal init: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	d.key = init.VerificationKey
	return d
}

// start starts the daemon on the configuration.
func (d *sealedDaemon) start() {
	d.t.Helper()
	var line string
	d.loggedProc, line = startLogged(d.t, "daemon", exec.Command(d.bin, "serve", "--config", d.config), "registrar-otel serving")
	d.ready = line
	if m := metricsRE.FindStringSubmatch(line); m != nil {
		d.metricsURL = m[1]
	}
}

// stop stops the daemon with SIGTERM and keeps its log.
func (d *sealedDaemon) stop() {
	d.t.Helper()
	d.terminate(d.t, "daemon")
	d.logs.WriteString(d.loggedProc.logs.String())
}

// headsFile writes the daemon's logs so far to a file, for --heads.
func (d *sealedDaemon) headsFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "daemon.log")
	writeFile(t, path, d.logs.Bytes(), 0o600)
	return path
}

// verifyReport is the part of `audit verify --json` the tests read.
type verifyReport struct {
	Verified     bool `json:"verified"`
	ProblemCount int  `json:"problem_count"`
	FirstProblem *struct {
		Kind   string `json:"kind"`
		File   string `json:"file"`
		Line   uint64 `json:"line"`
		Detail string `json:"detail"`
	} `json:"first_problem"`
	Seal *struct {
		ChainStart   string `json:"chain_start"`
		ChainedLines uint64 `json:"chained_lines"`
		Seals        uint64 `json:"seals"`
		TornLines    uint64 `json:"torn_lines"`
		UnsealedTail uint64 `json:"unsealed_tail"`
		HeadsChecked uint64 `json:"heads_checked"`
	} `json:"seal"`
}

// verify runs the binary's audit verify --key (and --heads) on dir.
func (d *sealedDaemon) verify(t *testing.T, dir, heads string) (int, verifyReport) {
	t.Helper()
	args := []string{"audit", "verify", "--dir", dir, "--key", d.key, "--json"}
	if heads != "" {
		args = append(args, "--heads", heads)
	}
	code, out, errOut := runCmd(t, exec.Command(d.bin, args...))
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit verify --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return code, rep
}

// storeFiles are the store's files in the order they were written: the
// generations oldest first, then the active file.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	gens, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gens {
		names = append(names, filepath.Base(g))
	}
	slices.Sort(names)
	return append(names, audit.ActiveFileName)
}

// copyStore copies dir (files 0600) to a new directory.
func copyStore(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "audit")
	mkdir(t, to, 0o700)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(to, e.Name()), b, 0o600)
	}
	return to
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func writeLines(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	writeFile(t, path, bytes.Join(ls, nil), 0o600)
}

// The intruder's tools: the key file's layout and the chain, as
// docs/en/audit.md#seal-chain describes them.

var chainSuffix = regexp.MustCompile(`,"chain":"([0-9a-f]{32})"}\n$`)

// intruderKey is the key the key file holds: magic (8), key id (8), epoch
// (8), key (32), CRC-32C (4).
func intruderKey(t *testing.T, stateDir string) (epoch uint64, key []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, audit.SealKeyFileName))
	if err != nil || len(b) != 60 || string(b[:8]) != "RGOSEAL1" {
		t.Fatalf("the key file: %d bytes, %v", len(b), err)
	}
	return binenc.LittleEndian.Uint64(b[16:24]), b[24:56]
}

// chainOf is a chained line's chain value.
func chainOf(line []byte) string {
	if m := chainSuffix.FindSubmatch(line); m != nil {
		return string(m[1])
	}
	return ""
}

// rechain returns line (chained or not) chained after prev with key.
func rechain(key []byte, prev string, line []byte) ([]byte, string) {
	head := line[:len(line)-2] // without "}\n"
	if loc := chainSuffix.FindIndex(line); loc != nil {
		head = line[:loc[0]]
	}
	p, _ := hex.DecodeString(prev)
	if prev == "" {
		p = make([]byte, 16)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(p)
	mac.Write(head)
	mac.Write([]byte("}\n"))
	c := hex.EncodeToString(mac.Sum(nil)[:16])
	return append(bytes.Clone(head), `,"chain":"`+c+`"}`+"\n"...), c
}

// rechainFrom rewrites the store from files[fi], line index li, to its
// end, chained with key after the line before; insert, if not nil, goes
// in first.
func rechainFrom(t *testing.T, dir string, files []string, fi, li int, key []byte, insert []byte) {
	t.Helper()
	prev := ""
	if li > 0 {
		prev = chainOf(readLines(t, filepath.Join(dir, files[fi]))[li-1])
	} else if fi > 0 {
		ls := readLines(t, filepath.Join(dir, files[fi-1]))
		prev = chainOf(ls[len(ls)-1])
	}
	for ; fi < len(files); fi++ {
		path := filepath.Join(dir, files[fi])
		ls := readLines(t, path)
		if insert != nil {
			ls = slices.Insert(ls, li, insert)
			insert = nil
		}
		for i := li; i < len(ls); i++ {
			ls[i], prev = rechain(key, prev, ls[i])
		}
		writeLines(t, path, ls)
		li = 0
	}
}

// indexOf is the index of the first line of ls at or after from that
// contains s.
func indexOf(t *testing.T, ls [][]byte, from int, s string) int {
	t.Helper()
	for i := from; i < len(ls); i++ {
		if bytes.Contains(ls[i], []byte(s)) {
			return i
		}
	}
	t.Fatalf("no line holds %s", s)
	return 0
}

// TestEndToEndEveryTamperingOfASealedStoreIsFound builds a sealed store
// with the real binary (two runs, a bring-up wave each, small files so it
// rotates: start, rotation and stop seals), checks that it verifies (the
// stop seal of each run is a head it checks, at least), then
// applies each of the ten tamperings to a copy and requires audit
// verify to exit 1 naming the first bad record.
func TestEndToEndEveryTamperingOfASealedStoreIsFound(t *testing.T) {
	d := newSealedDaemon(t, `audit_max_file_bytes = 65536
audit_max_retained_files = 50
rate_limit_admission_burst = 100000
`)
	// Two runs, and up to two more while no file holds a seal between two
	// other lines (the case "an epoch's seal removed" needs one): a run
	// whose stop seal fills the active file rotates it, leaving that seal
	// last in its file and the next start's first in the next.
	for run := 0; run < 2 || run < 4 && !hasInteriorSeal(t, d.auditDir); run++ {
		d.start()
		d.wave(t, 24+run)
		d.stop()
	}
	files := storeFiles(t, d.auditDir)
	if len(files) < 4 {
		t.Fatalf("files %v: want three generations or more and the active file", files)
	}
	heads := d.headsFile(t)
	code, rep := d.verify(t, d.auditDir, heads)
	if code != auditVerifyOK || rep.Seal == nil || rep.Seal.ChainStart != "genesis" || rep.Seal.UnsealedTail != 0 || rep.Seal.HeadsChecked < 2 {
		t.Fatalf("the untouched store: exit %d, %+v %+v", code, rep.FirstProblem, rep.Seal)
	}
	if code, scan := d.scan(); code != exitOK || scan.Anomalies {
		t.Fatalf("audit scan of the untouched store: exit %d, %+v", code, scan)
	}
	last, newest := len(files)-1, len(files)-2
	// A line to edit: one of a mint's records in the second generation.
	type want struct {
		kinds []string // the first problem is one of these
		file  int      // index in files
		line  uint64
	}
	cases := []struct {
		name   string
		heads  bool
		tamper func(t *testing.T, dir string) want
	}{
		{"one field of one line edited by one byte", false, func(t *testing.T, dir string) want {
			path := filepath.Join(dir, files[1])
			ls := readLines(t, path)
			i := indexOf(t, ls, 2, `"host":"`)
			j := bytes.Index(ls[i], []byte(`"host":"`)) + len(`"host":"`)
			ls[i][j] ^= 1 // one byte of the host's first letter
			writeLines(t, path, ls)
			return want{[]string{"chain_mismatch"}, 1, uint64(i + 1)}
		}},
		{"one line deleted", false, func(t *testing.T, dir string) want {
			path := filepath.Join(dir, files[1])
			ls := readLines(t, path)
			writeLines(t, path, slices.Delete(ls, 10, 11))
			return want{[]string{"chain_mismatch"}, 1, 11}
		}},
		{"one line replayed", false, func(t *testing.T, dir string) want {
			path := filepath.Join(dir, files[2])
			ls := readLines(t, path)
			writeLines(t, path, slices.Insert(ls, 8, ls[7]))
			return want{[]string{"record_replayed"}, 2, 9}
		}},
		{"two lines swapped", false, func(t *testing.T, dir string) want {
			path := filepath.Join(dir, files[0])
			ls := readLines(t, path)
			ls[20], ls[21] = ls[21], ls[20]
			writeLines(t, path, ls)
			return want{[]string{"chain_mismatch"}, 0, 21}
		}},
		{"a forged line inserted with the chain recomputed from the key read at the attack", false, func(t *testing.T, dir string) want {
			_, key := intruderKey(t, d.stateDir)
			ls := readLines(t, filepath.Join(dir, files[1]))
			forged := bytes.Replace(ls[indexOf(t, ls, 2, `"phase":"outcome"`)], []byte(`"outcome":{"class":"first_mint"}`), []byte(`"outcome":{"class":"idempotent_remint"}`), 1)
			rechainFrom(t, dir, files, 1, 5, key, forged)
			return want{[]string{"chain_mismatch"}, 1, 6}
		}},
		{"the tail truncated", true, func(t *testing.T, dir string) want {
			path := filepath.Join(dir, files[last])
			ls := readLines(t, path)
			writeLines(t, path, ls[:len(ls)-4])
			return want{[]string{"truncated"}, last, uint64(len(ls) - 4)}
		}},
		{"the newest generation deleted", true, func(t *testing.T, dir string) want {
			if err := os.Remove(filepath.Join(dir, files[newest])); err != nil {
				t.Fatal(err)
			}
			return want{[]string{"chain_mismatch"}, last, 1}
		}},
		{"a middle generation deleted", false, func(t *testing.T, dir string) want {
			if err := os.Remove(filepath.Join(dir, files[1])); err != nil {
				t.Fatal(err)
			}
			return want{[]string{"chain_mismatch"}, 2, 1}
		}},
		{"a whole generation rewritten consistently with a later key", true, func(t *testing.T, dir string) want {
			_, key := intruderKey(t, d.stateDir)
			rechainFrom(t, dir, files, 1, 0, key, nil)
			return want{[]string{"chain_mismatch"}, 1, 1}
		}},
		{"an epoch's seal removed", false, func(t *testing.T, dir string) want {
			// A seal inside a file (the first run's stop or the second's
			// start): the lines after it were chained with the next key.
			for fi, name := range files {
				path := filepath.Join(dir, name)
				ls := readLines(t, path)
				for i, l := range ls {
					if i > 0 && i+1 < len(ls) && bytes.Contains(l, []byte(`"action":"sealed"`)) {
						writeLines(t, path, slices.Delete(ls, i, i+1))
						return want{[]string{"chain_mismatch"}, fi, uint64(i + 1)}
					}
				}
			}
			t.Fatal("no seal inside a file")
			return want{}
		}},
	}
	detected := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, d.auditDir)
			w := tc.tamper(t, dir)
			h := ""
			if tc.heads {
				h = heads
			}
			code, rep := d.verify(t, dir, h)
			if code != auditVerifyProblems || rep.Verified || rep.FirstProblem == nil {
				t.Fatalf("not detected: exit %d, %+v", code, rep.Seal)
			}
			p := rep.FirstProblem
			if !slices.Contains(w.kinds, p.Kind) || p.File != files[w.file] || p.Line != w.line {
				t.Fatalf("first problem %s at %s:%d (%s); want %v at %s:%d", p.Kind, p.File, p.Line, p.Detail, w.kinds, files[w.file], w.line)
			}
			detected++
			t.Logf("%s at %s:%d: %s (%d problems)", p.Kind, p.File, p.Line, p.Detail, rep.ProblemCount)
		})
	}
	t.Logf("%d of %d kinds detected", detected, len(cases))
	if detected != 10 {
		t.Errorf("%d of 10 kinds detected", detected)
	}
}

// TestEndToEndAStoreSealedByTheBinaryStartsItsChainAtTheKey: a store the
// daemon wrote before sealing keeps its unsealed lines; from the start
// after audit seal init every line is chained, and a second init refuses.
func TestEndToEndAStoreSealedByTheBinaryStartsItsChainAtTheKey(t *testing.T) {
	d := startDaemon(t, "rate_limit_admission_burst = 100000", "")
	d.wave(t, 2)
	d.stop()
	_, stateDir, _ := daemonPaths(d.dir)
	code, out, errOut := d.run("audit", "seal", "init", "--config", d.config)
	m := regexp.MustCompile(`(?m)^    ([0-9a-f]{64})$`).FindStringSubmatch(out)
	if code != exitOK || m == nil {
		t.Fatalf("audit seal init: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := d.run("audit", "seal", "init", "--config", d.config); code != exitFailure || !strings.Contains(errOut, "already holds a sealing key") {
		t.Fatalf("a second init: exit %d, %s", code, errOut)
	}
	p, _ := startLogged(t, "daemon", exec.Command(d.bin, "serve", "--config", d.config), "registrar-otel serving")
	d.loggedProc = p
	d.wave(t, 1)
	d.stop()
	code, out, _ = runCmd(t, exec.Command(d.bin, "audit", "verify", "--dir", d.auditDir, "--key", m[1], "--json"))
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != auditVerifyOK || rep.Seal.ChainStart != "genesis" {
		t.Fatalf("audit verify: exit %d, %v\n%s", code, err, out)
	}
	var unsealed struct {
		Seal struct {
			UnsealedBefore uint64 `json:"unsealed_before"`
		} `json:"seal"`
	}
	json.Unmarshal([]byte(out), &unsealed)
	if unsealed.Seal.UnsealedBefore != 2*2*8 {
		t.Errorf("unsealed_before %d, want the first run's %d records", unsealed.Seal.UnsealedBefore, 2*2*8)
	}
	if _, err := os.Stat(filepath.Join(stateDir, audit.SealKeyFileName)); err != nil {
		t.Fatal(err)
	}
}

// hasInteriorSeal reports whether a file of the store in dir holds a
// sealed record with a line before and after it.
func hasInteriorSeal(t *testing.T, dir string) bool {
	t.Helper()
	for _, name := range storeFiles(t, dir) {
		ls := readLines(t, filepath.Join(dir, name))
		for i, l := range ls {
			if i > 0 && i+1 < len(ls) && bytes.Contains(l, []byte(`"action":"sealed"`)) {
				return true
			}
		}
	}
	return false
}
