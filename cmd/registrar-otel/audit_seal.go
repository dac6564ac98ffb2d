package main

// `audit seal init`: create the audit store's sealing key in
// registrar.state_dir and print its verification key, once.

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// Exit statuses of `audit seal init`.
const (
	auditSealCreated = exitOK      // the key was created
	auditSealExists  = exitFailure // a key file is there already: nothing changed
	auditSealFailed  = exitUsage   // usage error, or the state directory refused
)

var auditSealUsage = usageSpec{
	name:     "audit seal",
	synopsis: "init [--state-dir DIR | --config FILE] [--json]",
	what: `Turns on the audit store's sealing: creates the first sealing key in
registrar.state_dir (the file audit-seal.key, mode 0600, read by the
daemon at its next start) and prints its verification key, once. Keep that
key off this host, where whoever gets the daemon's uid later cannot read
it: it is what audit verify --key checks the store with.

From its next start the daemon chains every record it writes (a MAC of the
previous record's and its own bytes), ends a sealing epoch at each start,
rotation and stop and at least every 15 minutes, and replaces the key file's
key by the next one each time, erasing the old: an intruder who reads the
key file can rewrite nothing sealed before, without audit verify seeing it.

Run it as the daemon's user (sudo -u registrar-otel; as root, the key file
is given to the state directory's owner). It refuses to replace an existing key. Restart the
daemon afterwards.

Exit status: 0 when the key was created, 1 when the state directory holds
one already (nothing changed), 2 on a usage error or a state directory
that cannot be used.`,
	examples: []string{
		"registrar-otel audit seal init --config /etc/registrar-otel/registrar.toml",
		"registrar-otel audit seal init --state-dir var/lib --json",
	},
}

// runAuditSeal implements `registrar-otel audit seal init` (args are what
// follows "audit seal").
func runAuditSeal(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit seal")
	stateDir := flags.String("state-dir", "", "the daemon's state `directory` (default: registrar.state_dir of --config, or of the embedded defaults: var/lib)")
	cfgPath := flags.String("config", "", "the daemon's configuration `file`, to find registrar.state_dir (default: the embedded defaults, as make run)")
	asJSON := flags.Bool("json", false, "print one JSON object instead of text (schema: docs, commands, audit seal)")
	action := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	if code, ok := parseFlags(flags, auditSealUsage, args, stdout, stderr); !ok {
		if code == exitUsage {
			return auditSealFailed
		}
		return code
	}
	switch {
	case action == "":
		return usageError(stderr, "audit seal", "no action given: the action is init (registrar-otel audit seal init)")
	case action != "init":
		return usageError(stderr, "audit seal", "unknown action %q: the action is init", action)
	case *stateDir != "" && *cfgPath != "":
		return usageError(stderr, "audit seal", "--state-dir and --config both name the state directory: give one")
	}
	dir := *stateDir
	fromDefault := false
	if dir == "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := loadConfig(*cfgPath, os.Environ(), logger)
		if err != nil {
			printErrors(stderr, err)
			return auditSealFailed
		}
		dir, fromDefault = cfg.Registrar.StateDir, *cfgPath == ""
	}
	// As the daemon opens it; as root, the directory is the daemon's user's.
	root := os.Geteuid() == 0
	d, st, err := privdir.Open(dir, privdir.Options{Owner: !root, Ancestors: true})
	if err != nil {
		fmt.Fprintf(stderr, "audit seal init: the state directory %s cannot be used: %v\n", describePath(dir, fromDefault), err)
		return auditSealFailed
	}
	defer d.Close()
	verification, id, err := audit.CreateSealKey(d, rand.Reader)
	if errors.Is(err, audit.ErrSealKeyExists) {
		fmt.Fprintf(stderr, "audit seal init: %s already holds a sealing key (%s): the store is sealed; nothing was changed\n", describePath(dir, fromDefault), audit.SealKeyFileName)
		fmt.Fprintln(stderr, "  a store is sealed once, with one key: verify it with the verification key printed then (registrar-otel audit verify --key KEY)")
		return auditSealExists
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit seal init: creating the sealing key in %s: %v\n", describePath(dir, fromDefault), err)
		return auditSealFailed
	}
	keyFile := filepath.Join(dir, audit.SealKeyFileName)
	if root {
		if uid, ok := privdir.FileOwner(st); ok && uid != 0 {
			gid := fileGroup(st)
			if err := os.Lchown(keyFile, int(uid), gid); err != nil {
				fmt.Fprintf(stderr, "audit seal init: giving %s to the state directory's owner (uid %d): %v; the daemon cannot read it until it is its own\n", keyFile, uid, err)
				return auditSealFailed
			}
		}
	}
	if *asJSON {
		err = writeSealJSON(stdout, sealJSON{StateDir: dir, KeyFile: keyFile, KeyID: id, VerificationKey: verification})
	} else {
		err = writeSealText(stdout, keyFile, id, verification)
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit seal init: writing the verification key: %v\n  the key file was created; if the key was not seen, remove %s and run this again before the daemon starts\n", err, keyFile)
		return auditSealFailed
	}
	return auditSealCreated
}

// sealJSON is `audit seal init --json`'s stable shape.
type sealJSON struct {
	StateDir        string `json:"state_dir"`
	KeyFile         string `json:"key_file"`
	KeyID           string `json:"key_id"`
	VerificationKey string `json:"verification_key"`
}

func writeSealJSON(w io.Writer, s sealJSON) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func writeSealText(w io.Writer, keyFile, id, verification string) error {
	p := &errWriter{w: w}
	p.printf("audit seal init: sealing key created in %s (key id %s)\n\n", keyFile, id)
	p.printf("verification key (shown once; keep it off this host):\n\n    %s\n\n", verification)
	p.printf("Restart the daemon to start sealing. Keep its log (the journal) off the host too:\n")
	p.printf("its \"%s\" lines are what audit verify --heads checks the store's tail with.\n", audit.HeadMessage)
	p.printf("Verify with: registrar-otel audit verify --key KEY --heads FILE\n")
	return p.err
}
