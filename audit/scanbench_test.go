//go:build unix

package audit_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// scanBenchLines is the size of the benchmark store: a million lines,
// about 255 MB in 8 MiB generations, as the issue measured. With -short
// (make bench-smoke) the store has 10,000 lines, so the smoke run stays
// quick.
const scanBenchLines = 1_000_000

func scanBenchSize() (lines int, name string) {
	if testing.Short() {
		return 10_000, "registrar-otel-bench-scan-10k-v1"
	}
	return scanBenchLines, "registrar-otel-bench-scan-1M-v1"
}

// scanChildEnv makes the test binary a scan child: it scans the directory
// named by the variable with the decoder named by scanChildDecoderEnv and
// exits, so the parent can read the child's peak RSS alone.
const (
	scanChildEnv        = "REGISTRAR_OTEL_SCAN_CHILD_DIR"
	scanChildDecoderEnv = "REGISTRAR_OTEL_SCAN_CHILD_DECODER"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(scanChildEnv); dir != "" {
		os.Exit(scanChild(dir, os.Getenv(scanChildDecoderEnv)))
	}
	os.Exit(m.Run())
}

func scanChild(dir, decoder string) int {
	scan := audit.Scan
	switch decoder {
	case "reference":
		scan = audit.ScanReference
	case "tokens":
		scan = audit.ScanTokens
	case "verify":
		k := sealBenchKey()
		rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: dir, Key: &k})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The parent checks the child read every line, as a scan's.
		fmt.Printf("records=%d malformed=%d unpaired=0\n%s\n", rep.Seal.ChainedLines, rep.ProblemCount, hwm())
		return 0
	case "scan-hwm":
		defer func() { fmt.Println(hwm()) }()
	}
	rep, err := scan(context.Background(), audit.ScanOptions{Dir: dir, Now: scanBenchNow, Window: 365 * 24 * time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var sum uint64
	for _, n := range rep.Records {
		sum += n
	}
	// The parent checks the child read every line.
	fmt.Printf("records=%d malformed=%d unpaired=%d\n", sum, rep.MalformedRecords, rep.IntentWithoutOutcome)
	return 0
}

var scanBenchNow = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)

// scanBenchStore builds (once, then reuses from the temporary directory)
// a store of scanBenchLines lines as the daemon writes them under a
// flood-shaped load: pairs of intent and outcome from 64 callers, a counted
// record every 50 lines, ids of one daemon start with gaps (the throttled
// calls' ids), and 100 intents left without outcome.
func scanBenchStore(tb testing.TB) (dir string, lines, unpaired uint64) {
	tb.Helper()
	target, name := scanBenchSize()
	dir = filepath.Join(os.TempDir(), name)
	done := filepath.Join(dir, ".complete") // holds the line and unpaired counts
	if b, err := os.ReadFile(done); err == nil {
		if _, err := fmt.Sscanf(string(b), "%d %d", &lines, &unpaired); err == nil {
			return dir, lines, unpaired
		}
	}
	lines = 0
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	start := scanBenchNow.Add(-24 * time.Hour)
	var (
		f    *os.File
		w    *bufio.Writer
		size int
		gen  int
		seq  uint64
	)
	open := func(name string) {
		var err error
		if f, err = os.Create(filepath.Join(dir, name)); err != nil {
			tb.Fatal(err)
		}
		w, size = bufio.NewWriterSize(f, 1<<20), 0
	}
	closeFile := func() {
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	write := func(r *audit.Record) {
		b, err := audit.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		if size+len(b) > audit.DefaultMaxFileBytes {
			closeFile()
			gen++
			open(fmt.Sprintf("registrar-audit-%s-%06d.jsonl", start.Add(time.Duration(gen)*time.Minute).Format("20060102T150405Z"), gen))
		}
		w.Write(b)
		size += len(b)
		lines++
	}
	open(fmt.Sprintf("registrar-audit-%s-%06d.jsonl", start.Format("20060102T150405Z"), 0))
	for lines < uint64(target) {
		lines := int(lines) // for the arithmetic below
		seq += 1 + seq%7    // the throttled calls' ids leave gaps
		ts := start.Add(time.Duration(lines) * 40 * time.Millisecond)
		id := "Zm9vYmFyYmF6." + strconv.FormatUint(seq, 10)
		caller := "unix-peer:uid=" + strconv.Itoa(1000+int(seq%64))
		req := &audit.Requested{ServiceName: "review", Host: "host-" + strconv.Itoa(int(seq%97)), Instance: uint32(1 + seq%999)}
		write(&audit.Record{Phase: audit.PhaseIntent, TS: ts, RequestID: id, Verb: vocab.Mint, CallerIdentity: caller, Requested: req})
		if lines%10_000 == 5_000 && lines/10_000 < 100 {
			unpaired++
			continue // a crash mid-mint: no outcome
		}
		write(&audit.Record{Phase: audit.PhaseOutcome, TS: ts.Add(3 * time.Millisecond), RequestID: id, Verb: vocab.Mint, CallerIdentity: caller,
			Requested: req, RegistrationID: req.Host + "-review-" + fmt.Sprintf("%03d", req.Instance), Outcome: &audit.Outcome{Class: vocab.ClassIdempotentRemint}})
		if lines%50 == 0 {
			write(&audit.Record{Phase: audit.PhaseLimited, TS: ts, Verb: vocab.Mint, CallerIdentity: caller, LimitedBucket: vocab.Admission,
				Count: 1234, WindowStart: ts.Add(-time.Minute), WindowEnd: ts})
		}
	}
	closeFile()
	if err := os.WriteFile(done, fmt.Appendf(nil, "%d %d", lines, unpaired), 0o600); err != nil {
		tb.Fatal(err)
	}
	return dir, lines, unpaired
}

// BenchmarkScanMillionLines scans a million-line store (about 255 MB) per
// op in a child process, with the single-pass decoder and waiting-only
// state ("single-pass"), with the token decoder and the same state
// ("tokens": what the single pass alone buys), and with the decoder and
// state before both ("reference"), and reports the child's throughput and
// peak RSS. Read them as ratios within one pass; make bench interleaves
// passes.
func BenchmarkScanMillionLines(b *testing.B) {
	dir, lines, wantUnpaired := scanBenchStore(b)
	var bytes int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			bytes += fi.Size()
		}
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, decoder := range []string{"reference", "tokens", "single-pass"} {
		b.Run("decoder="+decoder, func(b *testing.B) {
			var maxRSS int64
			b.SetBytes(bytes)
			for b.Loop() {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), scanChildEnv+"="+dir, scanChildDecoderEnv+"="+decoder)
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("scan child: %v: %s", err, out)
				}
				var records, malformed, unpaired uint64
				if _, err := fmt.Sscanf(string(out), "records=%d malformed=%d unpaired=%d", &records, &malformed, &unpaired); err != nil ||
					records != lines || malformed != 0 || unpaired != wantUnpaired {
					b.Fatalf("scan child read %q, want %d records, none malformed, %d unpaired", out, lines, wantUnpaired)
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					maxRSS = max(maxRSS, ru.Maxrss*1024) // KiB on Linux
				}
			}
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			b.ReportMetric(float64(maxRSS)/(1<<20), "maxrss-MiB")
		})
	}
}

// BenchmarkScanDecoder scans the benchmark store (with -short, its
// 10,000-line version) in this process with the token decoder on every line
// and with the single-pass decoder, the scan's state being the same: the
// figure of fastdecode.go on the scan path. Run it with -count so the two
// interleave, and read them as a ratio.
func BenchmarkScanDecoder(b *testing.B) {
	dir, lines, _ := scanBenchStore(b)
	for _, c := range []struct {
		name string
		scan func(context.Context, audit.ScanOptions) (*audit.Report, error)
	}{{"tokens", audit.ScanTokens}, {"single-pass", audit.Scan}} {
		b.Run("decoder="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rep, err := c.scan(context.Background(), audit.ScanOptions{Dir: dir, Now: scanBenchNow, Window: 365 * 24 * time.Hour})
				if err != nil || rep.MalformedRecords != 0 {
					b.Fatalf("scan: %v, %+v", err, rep)
				}
			}
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// sealBenchKey is the sealed benchmark store's verification key: fixed, so
// the store built once is reused.
func sealBenchKey() [audit.SealKeyBytes]byte {
	return sha256.Sum256([]byte("registrar-otel bench seal key"))
}

// sealedBenchStore is scanBenchStore's store as a sealed store writes it:
// every line chained, the first file opening with the key's first seal and
// each later file with a rotation seal, built once (then reused) from the
// unsealed one. It returns the directory and its line count.
func sealedBenchStore(tb testing.TB) (dir string, lines uint64) {
	tb.Helper()
	src, _, _ := scanBenchStore(tb)
	_, name := scanBenchSize()
	dir = filepath.Join(os.TempDir(), name+"-sealed")
	done := filepath.Join(dir, ".complete")
	if b, err := os.ReadFile(done); err == nil {
		if _, err := fmt.Sscanf(string(b), "%d", &lines); err == nil {
			return dir, lines
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	k0 := sealBenchKey()
	id := audit.KeyID(&k0)
	names, err := filepath.Glob(filepath.Join(src, "registrar-audit-*.jsonl"))
	if err != nil || len(names) == 0 {
		tb.Fatalf("the unsealed store: %v %v", names, err)
	}
	keys := audit.DeriveKeys(k0, len(names)+1)
	prev := ""
	for i, path := range names {
		in, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, filepath.Base(path)))
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriterSize(out, 1<<20)
		write := func(line []byte, epoch int) {
			var chained []byte
			chained, prev = audit.Rechain(keys[epoch], prev, line)
			w.Write(chained)
			lines++
		}
		reason := audit.SealReasonRotation
		if i == 0 {
			reason = audit.SealReasonStart
		}
		seal, err := audit.Marshal(&audit.Record{Phase: audit.PhaseAdmin, TS: scanBenchNow.Add(-24 * time.Hour), CallerIdentity: audit.DaemonIdentity,
			Admin: &audit.Admin{Action: audit.ActionSealed, Sealed: audit.Sealed{Epoch: uint64(i), Reason: reason, KeyID: id}}})
		if err != nil {
			tb.Fatal(err)
		}
		write(seal, i)
		br := bufio.NewReaderSize(in, audit.MaxRecordBytes)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				write(line, i+1)
			}
			if err != nil {
				break
			}
		}
		in.Close()
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := out.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(done, fmt.Appendf(nil, "%d", lines), 0o600); err != nil {
		tb.Fatal(err)
	}
	return dir, lines
}

// BenchmarkVerifyMillionLines is issue 40's "audit verify of a 1M-line
// store at most 1.3x audit scan's time, memory bounded as the scan's":
// the sealed benchmark store (scanBenchStore's million lines, chained) is
// scanned and verified with its key, each in a child process, per op;
// lines/s and the child's peak RSS (VmHWM, hwm) are reported. Read them as ratios
// within one pass, the passes interleaved (-count, or make bench).
func BenchmarkVerifyMillionLines(b *testing.B) {
	dir, lines := sealedBenchStore(b)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"scan-hwm", "verify"} {
		b.Run("run="+map[string]string{"scan-hwm": "scan", "verify": "verify"}[mode], func(b *testing.B) {
			var maxRSS int64
			for b.Loop() {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), scanChildEnv+"="+dir, scanChildDecoderEnv+"="+mode)
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("child: %v: %s", err, out)
				}
				var records, problems, unpaired uint64
				if _, err := fmt.Sscanf(string(out), "records=%d malformed=%d unpaired=%d", &records, &problems, &unpaired); err != nil ||
					records != lines || problems != 0 {
					b.Fatalf("child read %q, want %d lines and nothing wrong", out, lines)
				}
				if _, hw, ok := strings.Cut(string(out), "hwm-kib="); ok {
					var kib int64
					fmt.Sscanf(hw, "%d", &kib)
					maxRSS = max(maxRSS, kib*1024)
				}
			}
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			b.ReportMetric(float64(maxRSS)/(1<<20), "hwm-MiB")
		})
	}
}

// hwm is the child's own peak RSS, "hwm-kib=N" from /proc/self/status's
// VmHWM: its rusage maxrss also counts the parent's, whose address space
// the child shared until exec (os/exec's vfork), so a parent that built a
// large store reports its own peak for every child.
func hwm() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return "hwm-kib=" + strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		}
	}
	return "hwm-kib=0"
}
