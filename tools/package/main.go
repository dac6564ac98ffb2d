// Command package builds registrar-otel's Debian package and release
// tarball from a stamped binary (make package):
//
//	go run . -root ../.. -bin ../../bin/registrar-otel -version 0.9.0 -arch amd64 -out ../../dist
//
// It writes registrar-otel_<version>_<arch>.deb (nfpm, packaging/nfpm.yaml),
// registrar-otel_<version>_linux_<arch>.tar.gz and SHA256SUMS over both.
// A module of its own, so nfpm stays out of the daemon's go.mod.
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	bin := flag.String("bin", "bin/registrar-otel", "the stamped binary, relative to -root")
	version := flag.String("version", "", "the package version (the VERSION file when empty)")
	arch := flag.String("arch", "amd64", "the Debian architecture")
	out := flag.String("out", "dist", "the output directory, relative to -root")
	flag.Parse()
	if err := run(os.Stdout, *root, *bin, *version, *arch, *out); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func run(log io.Writer, root, bin, version, arch, out string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	if version == "" {
		v, err := os.ReadFile("VERSION")
		if err != nil {
			return err
		}
		version = strings.TrimSpace(string(v))
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the binary: %w (run make build first)", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	deb, err := buildDeb(log, bin, version, arch, out)
	if err != nil {
		return err
	}
	tgz, err := buildTarball(log, bin, version, arch, out)
	if err != nil {
		return err
	}
	return writeSums(filepath.Join(out, "SHA256SUMS"), deb, tgz)
}

// optionalPrefix holds the sources a package may lack: the systemd unit
// and socket, skipped with a message until they are in the tree.
const optionalPrefix = "packaging/systemd/"

func buildDeb(log io.Writer, bin, version, arch, out string) (string, error) {
	env := map[string]string{"VERSION": version, "ARCH": arch}
	cfg, err := nfpm.ParseFileWithEnvMapping("packaging/nfpm.yaml", func(k string) string { return env[k] })
	if err != nil {
		return "", fmt.Errorf("packaging/nfpm.yaml: %w", err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	var kept files.Contents
	for _, c := range info.Contents {
		if c.Destination == "/usr/bin/registrar-otel" {
			c.Source = bin
		}
		if strings.HasPrefix(c.Source, optionalPrefix) {
			if _, err := os.Stat(c.Source); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(log, "package: %s is not in this tree: %s is left out of the package\n", c.Source, c.Destination)
				continue
			}
		}
		kept = append(kept, c)
	}
	staged, err := stage(filepath.Join(out, ".stage"), version, info.Maintainer)
	if err != nil {
		return "", err
	}
	info.Contents = append(kept, staged...)
	info.Depends = append(info.Depends, "libc6 (>= 2.34)")
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, pkg.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("deb: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "package: %s\n", path)
	return path, nil
}

// stage writes what the package carries compressed, as Debian wants it:
// each packaging/man page gzipped into /usr/share/man/man1, and the Debian
// changelog (pointing at CHANGELOG.md) as changelog.gz.
func stage(dir, version, maintainer string) (files.Contents, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out files.Contents
	pages, err := filepath.Glob("packaging/man/*.1")
	if err != nil || len(pages) == 0 {
		return nil, fmt.Errorf("no man pages in packaging/man (%v): run go test ./cmd/registrar-otel -run TestManPagesAndCompletion -update", err)
	}
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.Base(p)+".gz")
		if err := writeGzip(dst, raw); err != nil {
			return nil, err
		}
		out = append(out, &files.Content{Source: dst, Destination: "/usr/share/man/man1/" + filepath.Base(p) + ".gz", FileInfo: &files.ContentFileInfo{Mode: 0o644}})
	}
	// A native package's changelog in Debian's format; the full history
	// is CHANGELOG.md beside it.
	changelog := fmt.Sprintf("registrar-otel (%s) unstable; urgency=medium\n\n  * Release %s: see /usr/share/doc/registrar-otel/CHANGELOG.md.\n\n -- %s  %s\n",
		version, version, maintainer, changelogDate())
	dst := filepath.Join(dir, "changelog.gz")
	if err := writeGzip(dst, []byte(changelog)); err != nil {
		return nil, err
	}
	out = append(out, &files.Content{Source: dst, Destination: "/usr/share/doc/registrar-otel/changelog.gz", FileInfo: &files.ContentFileInfo{Mode: 0o644}})
	return out, nil
}

// changelogDate is the release date of CHANGELOG.md's newest release
// heading ("## [0.9.0] - 2026-12-01") in RFC 2822 form, so the package is
// reproducible.
func changelogDate() string {
	raw, _ := os.ReadFile("CHANGELOG.md")
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## [") && !strings.HasPrefix(line, "## [Unreleased]") {
			if i := strings.LastIndex(line, " - "); i >= 0 {
				if d, err := time.Parse("2006-01-02", strings.TrimSpace(line[i+3:])); err == nil {
					return d.Format(time.RFC1123Z)
				}
			}
		}
	}
	return time.Unix(0, 0).UTC().Format(time.RFC1123Z)
}

// writeGzip writes raw gzipped at best compression with no name or time
// in the header (gzip -9n).
func writeGzip(path string, raw []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := zw.Write(raw); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tarEntry is one file of the release tarball: src in the tree, name
// under the tarball's top directory.
type tarEntry struct {
	src, name string
	mode      int64
}

func buildTarball(log io.Writer, bin, version, arch, out string) (string, error) {
	top := fmt.Sprintf("registrar-otel_%s_linux_%s", version, arch)
	entries := []tarEntry{
		{bin, "registrar-otel", 0o755},
		{"docs/en/examples/registrar.toml", "registrar.toml.example", 0o644},
		{"packaging/registrar.toml", "registrar.toml.packaged", 0o644},
		{"CHANGELOG.md", "CHANGELOG.md", 0o644},
		{"VERSION", "VERSION", 0o644},
		{"dashboards/alerts.yml", "dashboards/alerts.yml", 0o644},
		{"dashboards/registrar-limiter.json", "dashboards/registrar-limiter.json", 0o644},
	}
	for _, u := range []string{"registrar-otel.service", "registrar-otel.socket", "registrar-otel.tmpfiles"} {
		src := optionalPrefix + u
		if _, err := os.Stat(src); err == nil {
			entries = append(entries, tarEntry{src, "systemd/" + u, 0o644})
		} else {
			fmt.Fprintf(log, "package: %s is not in this tree: left out of the tarball\n", src)
		}
	}
	for _, dir := range []string{"packaging/man", "packaging/completion"} {
		pages, _ := filepath.Glob(dir + "/*")
		for _, p := range pages {
			entries = append(entries, tarEntry{p, strings.TrimPrefix(p, "packaging/"), 0o644})
		}
	}
	for _, lang := range []string{"en", "ko"} {
		err := filepath.WalkDir(filepath.Join("docs", lang), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			entries = append(entries, tarEntry{p, p, 0o644})
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	path := filepath.Join(out, top+".tar.gz")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		raw, err := os.ReadFile(e.src)
		if err != nil {
			f.Close()
			return "", err
		}
		hdr := &tar.Header{Name: top + "/" + e.name, Mode: e.mode, Size: int64(len(raw)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return "", err
		}
		if _, err := tw.Write(raw); err != nil {
			f.Close()
			return "", err
		}
	}
	for _, c := range []io.Closer{tw, zw, f} {
		if err := c.Close(); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(log, "package: %s\n", path)
	return path, nil
}

// writeSums writes sha256sum's format ("<hex>  <name>") for each file.
func writeSums(path string, files ...string) error {
	var b strings.Builder
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(p))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
