package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/config"
)

// The sources of the user config check judges for (judgedFor.Source).
const (
	judgeUnit = "unit" // User= of the installed registrar-otel.service, root running the check
	judgeFlag = "flag" // --user
	judgeSelf = "self" // the user running the check
)

// judgedFor is the user config check judges the paths and files for: the
// user serve will run as. Run as root, that is the installed service
// unit's User= (or --user NAME), not root: the unit's serve does not run
// as root, and the owner rule accepts the directories of its own user.
// Its JSON form is config check --json's judged_for member.
type judgedFor struct {
	// User is the user's name, "" for a uid the user database lacks.
	User string `json:"user"`
	UID  uint32 `json:"uid"`
	// Source says where the user came from: judgeUnit, judgeFlag or
	// judgeSelf.
	Source string `json:"source"`
	// Unit is the installed service unit when it runs serve as this user
	// (always for judgeUnit): what systemd prepares for serve (its
	// *Directory=, its groups, the socket unit's socket) is taken into
	// account. "" when no unit does.
	Unit string `json:"unit"`

	// self: UID is this process's effective uid, so its own access is the
	// user's (the kernel answers, ACLs and capabilities included).
	self bool
	// gid and gids are the user's primary group and every group it is in
	// (the unit's Group= and SupplementaryGroups= included), for the
	// access rules judged for another user.
	gid  uint32
	gids []uint32
	// unit is the installed service unit when it runs serve as this user;
	// its *Directory= directories and the socket unit's socket are what
	// systemd prepares before serve starts.
	unit *unitFile
	// socketUnit is the installed socket unit, nil for none.
	socketUnit *unitFile
	// why says, for judgeSelf as root, why no unit's user was taken.
	why string
}

// line is the text output's line naming the user: "judged for:
// registrar-otel (uid 103), the User= of
// /lib/systemd/system/registrar-otel.service".
func (j *judgedFor) line() string {
	who := j.who()
	switch j.Source {
	case judgeUnit:
		if j.unit != nil && j.unit.value("Service", "User") == "" {
			return fmt.Sprintf("judged for: %s, as %s sets no User=", who, j.Unit)
		}
		return fmt.Sprintf("judged for: %s, the User= of %s", who, j.Unit)
	case judgeFlag:
		return fmt.Sprintf("judged for: %s, given by --user%s", who, j.alsoUnit())
	}
	if j.why != "" {
		return fmt.Sprintf("judged for: %s, the user running this check (%s)", who, j.why)
	}
	return fmt.Sprintf("judged for: %s, the user running this check%s", who, j.alsoUnit())
}

// alsoUnit names the unit running serve as the user chosen otherwise.
func (j *judgedFor) alsoUnit() string {
	if j.unit == nil {
		return ""
	}
	return " and the User= of " + j.Unit
}

// who names the user in a message: "registrar-otel (uid 103)", or "uid
// 4242" for a uid without a name.
func (j *judgedFor) who() string {
	if j.User == "" {
		return fmt.Sprintf("uid %d", j.UID)
	}
	return fmt.Sprintf("%s (uid %d)", j.User, j.UID)
}

// usageErr is a usage error of config check (exit 2, no report).
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

// resolveJudge decides whom config check judges for. given is --user's
// value, "" when the flag was not given. Run as root without it, that is
// the installed service unit's User= (root when the unit sets none, or
// when no unit is installed); with it, that user. Run as another user,
// that user: it cannot see into what another user could (their 0700
// directories and 0600 files are closed to it), so --user naming another
// user is a usage error. An unknown --user is a usage error; a unit whose
// User= the host lacks is an error of the check (systemd could not start
// serve), and the check then judges for root.
//
// Whichever way the user was chosen, when the installed unit runs serve
// as that user, what systemd prepares for it (the unit's *Directory=, its
// groups, the socket unit's socket) is taken into account.
func resolveJudge(given string, res *checkResult) (*judgedFor, error) {
	euid := uint32(os.Geteuid())
	var j *judgedFor
	switch {
	case given != "":
		u, err := lookupUser(given)
		if err != nil {
			return nil, &usageErr{fmt.Sprintf("--user %q: no such user on this host (%v)", given, err)}
		}
		if j, err = userJudge(u, judgeFlag, nil); err != nil {
			return nil, &usageErr{fmt.Sprintf("--user %q: %v", given, err)}
		}
		if euid != 0 && j.UID != euid {
			return nil, &usageErr{fmt.Sprintf("--user %s: only root may judge for another user (this is uid %d, which cannot see into %s's private directories and files); run it as root, or as that user: runuser -u %s -- registrar-otel config check …", given, euid, given, given)}
		}
	case euid != 0:
		j = selfJudge("")
	default:
		unit, err := findUnit(unitDirs, serviceUnitName)
		switch {
		case err != nil:
			res.errorf("", "reading the installed service unit: %v; judged for root instead (give --user NAME to judge for the user serve runs as)", err)
			return selfJudge(""), nil
		case unit == nil:
			return selfJudge("no " + serviceUnitName + " installed"), nil
		}
		name := unit.value("Service", "User")
		if name == "" {
			name = "root"
		}
		u, err := lookupUser(name)
		if err != nil {
			res.errorf("", "%s runs serve as User=%s, which this host does not have: systemd cannot start it (status 217/USER); create the user (the package's postinst does) or correct the unit; judged for root instead", unit.Path, name)
			return selfJudge(""), nil
		}
		if j, err = userJudge(u, judgeUnit, unit); err != nil {
			res.errorf("", "%s: %v; judged for root instead", unit.Path, err)
			return selfJudge(""), nil
		}
	}
	j.attachUnit()
	return j, nil
}

// selfJudge is the judge of the user running the check, with its own
// groups; why says, as root, why no unit's user was taken.
func selfJudge(why string) *judgedFor {
	euid := uint32(os.Geteuid())
	j := &judgedFor{UID: euid, Source: judgeSelf, self: true, why: why, gid: uint32(os.Getegid())}
	if u, err := user.LookupId(strconv.FormatUint(uint64(euid), 10)); err == nil {
		j.User = u.Username
	}
	j.gids = []uint32{j.gid}
	if groups, err := os.Getgroups(); err == nil {
		for _, g := range groups {
			if !slices.Contains(j.gids, uint32(g)) {
				j.gids = append(j.gids, uint32(g))
			}
		}
	}
	return j
}

// attachUnit takes the installed service unit, and its socket unit, into
// account when the unit runs serve as j's user: what systemd prepares for
// serve is then what that user's serve finds. A unit running serve as
// another user says nothing about this one's, and is left out.
func (j *judgedFor) attachUnit() {
	if j.unit == nil {
		unit, err := findUnit(unitDirs, serviceUnitName)
		if err != nil || unit == nil {
			return
		}
		name := unit.value("Service", "User")
		if name == "" {
			name = "root"
		}
		u, err := lookupUser(name)
		if err != nil || u.Uid != strconv.FormatUint(uint64(j.UID), 10) {
			return
		}
		j.unit, j.Unit = unit, unit.Path
		j.addUnitGroups()
	}
	j.socketUnit, _ = findUnit(unitDirs, socketUnitName)
}

// userJudge is the judge of the user u, with the groups it would have:
// its primary group and every group it is a member of, and under a unit
// (addUnitGroups) Group= and SupplementaryGroups=, as systemd sets them.
func userJudge(u *user.User, source string, unit *unitFile) (*judgedFor, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("non-numeric uid %s", u.Uid)
	}
	j := &judgedFor{User: u.Username, UID: uint32(uid), Source: source, unit: unit, self: uint32(uid) == uint32(os.Geteuid())}
	names := []string{u.Gid}
	if ids, err := u.GroupIds(); err == nil {
		names = append(names, ids...)
	}
	for i, n := range names {
		gid, err := lookupGID(n)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			j.gid = gid
		}
		if !slices.Contains(j.gids, gid) {
			j.gids = append(j.gids, gid)
		}
	}
	if unit != nil {
		j.Unit = unit.Path
		if err := j.addUnitGroups(); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// addUnitGroups adds the unit's Group= (the primary group serve runs with)
// and SupplementaryGroups= to j's groups.
func (j *judgedFor) addUnitGroups() error {
	if g := j.unit.value("Service", "Group"); g != "" {
		gid, err := lookupGID(g)
		if err != nil {
			return err
		}
		j.gid = gid
		if !slices.Contains(j.gids, gid) {
			j.gids = append(j.gids, gid)
		}
	}
	for _, n := range j.unit.list("Service", "SupplementaryGroups") {
		gid, err := lookupGID(n)
		if err != nil {
			return err
		}
		if !slices.Contains(j.gids, gid) {
			j.gids = append(j.gids, gid)
		}
	}
	return nil
}

// lookupUser finds a user by name, or by numeric uid.
func lookupUser(name string) (*user.User, error) {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		return user.LookupId(name)
	}
	return user.Lookup(name)
}

// lookupGID finds a group's gid, by name or as a number.
func lookupGID(name string) (uint32, error) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("group %s: %v", name, err)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %s has a non-numeric gid %s", name, g.Gid)
	}
	return uint32(n), nil
}

// root reports whether the judged user is root, whom no access rule stops.
func (j *judgedFor) root() bool { return j.UID == 0 }

// managed returns the *Directory= entry of the service unit naming dir,
// when the user came from the unit: systemd creates that directory and
// gives it to the user at each start, so what is on disk now is not what
// serve will find.
func (j *judgedFor) managed(dir string) (managedDir, bool) {
	if j.unit == nil {
		return managedDir{}, false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return managedDir{}, false
	}
	m, ok := j.unit.managedDirs()[abs]
	return m, ok
}

// handsOverSocket reports whether the installed socket unit binds path and
// hands it to serve (judgeUnit only), so serve binds nothing there.
func (j *judgedFor) handsOverSocket(path string) bool {
	if j.socketUnit == nil {
		return false
	}
	abs, err := filepath.Abs(path)
	return err == nil && j.socketUnit.listensOn(abs)
}

// checkReadable reports each file serve reads at start that j's user could
// not read: the configuration file itself, the TLS files, the subordinate
// uid file and the openbao backend's CA bundle and token file. The check
// read them already as the user running it; for another user (root
// judging for the unit's) the owner, group and mode decide (judgedFor.
// access). A token the unit hands over as a systemd credential
// (LoadCredential=openbao-token:…) is read by systemd, not by serve's
// user, and is left out.
func checkReadable(res *checkResult, cfg *config.Config, environ []string, j *judgedFor) {
	if j.self || j.root() {
		return
	}
	read := func(key, what, path string) {
		if path == "" {
			return
		}
		if _, err := os.Stat(path); err != nil {
			return // reported by the check that reads it
		}
		if ok, why := j.access(path, mayRead); !ok {
			if key == "" {
				res.errorf(key, "%s: serve, running as %s, could not read %s: %s", path, j.who(), what, why)
				return
			}
			res.errorf(key, "%s %s: serve, running as %s, could not read %s: %s", key, path, j.who(), what, why)
		}
	}
	if res.Source != config.SourceDefaults {
		read("", "the configuration file", res.Source)
	}
	r := &cfg.Registrar
	if r.TLSListen != "" {
		read("registrar.tls_cert_file", "the certificate", r.TLSCertFile)
		read("registrar.tls_key_file", "the private key", r.TLSKeyFile)
		read("registrar.tls_client_ca_file", "the client CA", r.TLSClientCAFile)
	}
	read("registrar.subuid_file", "the subordinate uid file", r.SubuidFile)
	if r.Backend == config.BackendOpenBao {
		read("openbao.ca_file", "the CA bundle", cfg.OpenBao.CAFile)
		if lookupIn(environ)(config.EnvCredentialsDirectory) == "" && !j.loadsCredential(config.CredentialName) {
			read("openbao.token_file", "the token", cfg.OpenBao.TokenFile)
		}
	}
}

// loadsCredential reports whether the service unit hands the credential
// name to serve (LoadCredential= or LoadCredentialEncrypted=).
func (j *judgedFor) loadsCredential(name string) bool {
	if j.unit == nil {
		return false
	}
	for _, d := range []string{"LoadCredential", "LoadCredentialEncrypted"} {
		for _, v := range j.unit.assigned["Service."+d] {
			if id, _, _ := strings.Cut(v, ":"); id == name {
				return true
			}
		}
	}
	return false
}

// ambientCap reports whether the service unit gives serve the capability
// (AmbientCapabilities=, keeping it in CapabilityBoundingSet=).
func (j *judgedFor) ambientCap(name string) bool {
	if j.unit == nil {
		return false
	}
	bounding := j.unit.list("Service", "CapabilityBoundingSet")
	bounded := len(j.unit.assigned["Service.CapabilityBoundingSet"]) == 0 || slices.Contains(bounding, name)
	return bounded && slices.Contains(j.unit.list("Service", "AmbientCapabilities"), name)
}
