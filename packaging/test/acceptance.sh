#!/usr/bin/env bash
# The package's acceptance on a Debian host, as root (make package-check;
# .ci/run calls it): install, the files with their owners and modes, the
# service user, config check, the daemon as the service user answering a
# mint, remove, purge, and an upgrade from the previous commit's package
# that keeps the registry and an edited conffile.
#
#   packaging/test/acceptance.sh dist/registrar-otel_<version>_<arch>.deb [previous.deb]
#
# Without a previous.deb it builds the package of the previous commit
# (git worktree of HEAD^, make package) or, when that commit has no
# packaging yet, this tree's package at version <version>~prev.
# It refuses to run on a host where registrar-otel is already installed or
# its user exists, and undoes everything it did on exit.
set -euo pipefail

deb=${1:?usage: acceptance.sh PACKAGE.deb [PREVIOUS.deb]}
prev=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")

fail() { echo "acceptance: FAIL: $*" >&2; exit 1; }
step() { echo "acceptance: $*"; }

[ "$(id -u)" = 0 ] || { echo "acceptance: skipped: needs root (dpkg -i)"; exit 0; }
command -v dpkg >/dev/null || { echo "acceptance: skipped: no dpkg"; exit 0; }
if dpkg-query -W -f='${Status}' registrar-otel 2>/dev/null | grep -q installed || getent passwd registrar-otel >/dev/null; then
    fail "registrar-otel is already installed here (or its user exists): run on a host without it"
fi

work=$(mktemp -d)
daemon_pid=
cleanup() {
    set +e
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
    dpkg -P registrar-otel >/dev/null 2>&1
    rm -rf /var/lib/registrar-otel /etc/registrar-otel /run/registrar-otel
    getent passwd registrar-otel >/dev/null && deluser --quiet --system registrar-otel >/dev/null 2>&1
    for g in registrar-otel registrar-callers; do
        getent group "$g" >/dev/null && delgroup --quiet --system "$g" >/dev/null 2>&1
    done
    [ -d "$work/prev-tree" ] && git -C "$root" worktree remove --force "$work/prev-tree" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# want_stat PATH OWNER:GROUP MODE
want_stat() {
    local got
    got=$(stat -c '%U:%G %a' "$1" 2>/dev/null) || fail "$1 is missing"
    [ "$got" = "$2 $3" ] || fail "$1 is $got, want $2 $3"
}

start_daemon() {
    install -d -o registrar-otel -g registrar-callers -m 0750 /run/registrar-otel
    # setpriv execs the daemon (no process in between to take the signals),
    # as the unit does: User=registrar-otel with its groups.
    setpriv --reuid registrar-otel --regid registrar-otel --init-groups -- /usr/bin/registrar-otel serve --config /etc/registrar-otel/registrar.toml \
        >"$work/daemon.log" 2>&1 &
    daemon_pid=$!
    for _ in $(seq 1 200); do
        grep -q "registrar-otel serving" "$work/daemon.log" && return 0
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; fail "the daemon exited"; }
        sleep 0.05
    done
    cat "$work/daemon.log" >&2
    fail "the daemon did not serve within 10 s"
}

stop_daemon() {
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || fail "the daemon exited $? on SIGTERM"
    daemon_pid=
}

mint() { # mint HOST WANT_OUTCOME
    local out
    out=$(/usr/bin/registrar-otel mint --config /etc/registrar-otel/registrar.toml \
        --service-name collector --host "$1" --component collector) || fail "mint $1: exit $?"
    case "$out" in "$2 "*) ;; *) fail "mint $1 answered: $out (want $2)" ;; esac
}

# --- install -----------------------------------------------------------
step "dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
getent passwd registrar-otel | grep -q ':/usr/sbin/nologin$' || fail "no system user registrar-otel with /usr/sbin/nologin"
getent group registrar-callers >/dev/null || fail "no group registrar-callers"
want_stat /usr/bin/registrar-otel root:root 755
want_stat /etc/registrar-otel root:registrar-otel 750
want_stat /etc/registrar-otel/registrar.toml root:registrar-otel 640
want_stat /var/lib/registrar-otel registrar-otel:registrar-otel 700
want_stat /var/lib/registrar-otel/audit registrar-otel:registrar-otel 700
want_stat /usr/share/registrar-otel/alerts.yml root:root 644
want_stat /usr/share/registrar-otel/registrar-limiter.json root:root 644
want_stat /usr/share/bash-completion/completions/registrar-otel root:root 644
want_stat /usr/share/man/man1/registrar-otel-backup.1.gz root:root 644
want_stat /usr/share/doc/registrar-otel/en/backup.md root:root 644
for u in registrar-otel.service registrar-otel.socket; do
    if [ -f "$root/packaging/systemd/$u" ]; then want_stat "/lib/systemd/system/$u" root:root 644; fi
done
dpkg-query -W -f='${Conffiles}\n' registrar-otel | grep -q '/etc/registrar-otel/registrar.toml' || fail "registrar.toml is not a conffile"
runuser -u registrar-otel -- /usr/bin/registrar-otel config check --config /etc/registrar-otel/registrar.toml >/dev/null \
    || fail "config check of the installed configuration, as the service user"
# The install page's command as written, as root: it judges for the unit's
# User= (issue 37, finding 6: it judged for root and refused the package's
# own directories).
if [ -f /lib/systemd/system/registrar-otel.service ]; then
    /usr/bin/registrar-otel config check --config /etc/registrar-otel/registrar.toml >"$work/check.out" 2>&1 \
        || { cat "$work/check.out" >&2; fail "config check of the installed configuration, as root (docs/en/install.md)"; }
    grep -q "^judged for: registrar-otel (uid [0-9]*), the User= of /lib/systemd/system/registrar-otel.service$" "$work/check.out" \
        || { cat "$work/check.out" >&2; fail "config check as root did not judge for the unit's user"; }
fi

step "the daemon as the service user answers a mint"
start_daemon
mint h1 first_mint
/usr/bin/registrar-otel backup --config /etc/registrar-otel/registrar.toml --out "$work/backup.db" >/dev/null || fail "backup as root"
stop_daemon
want_stat /var/lib/registrar-otel/registrar.db registrar-otel:registrar-otel 600

# --- remove and purge ----------------------------------------------------
step "dpkg -r keeps the configuration, the registry and the evidence"
dpkg -r registrar-otel >/dev/null 2>&1 || fail "dpkg -r"
[ ! -e /usr/bin/registrar-otel ] || fail "dpkg -r left /usr/bin/registrar-otel"
[ -f /etc/registrar-otel/registrar.toml ] || fail "dpkg -r removed the conffile"
[ -f /var/lib/registrar-otel/registrar.db ] || fail "dpkg -r removed the registry"
[ -d /var/lib/registrar-otel/audit ] || fail "dpkg -r removed the audit evidence"

step "dpkg -P removes the configuration and says the evidence is kept"
dpkg -P registrar-otel >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg -P"; }
[ ! -e /etc/registrar-otel ] || fail "dpkg -P left /etc/registrar-otel"
[ -f /var/lib/registrar-otel/registrar.db ] || fail "dpkg -P removed the registry"
grep -q "under /var/lib/registrar-otel are kept" "$work/purge.log" || { cat "$work/purge.log" >&2; fail "dpkg -P did not say the evidence is kept"; }
rm -rf /var/lib/registrar-otel

# --- upgrade -------------------------------------------------------------
if [ -z "$prev" ]; then
    version=$(cat "$root/VERSION")
    if git -C "$root" cat-file -e HEAD^:packaging/nfpm.yaml 2>/dev/null; then
        step "building the previous commit's package (HEAD^)"
        git -C "$root" worktree add --detach "$work/prev-tree" HEAD^ >/dev/null 2>&1
        make -C "$work/prev-tree" package PKG_VERSION="$version~prev" >"$work/prev-build.log" 2>&1 \
            || { tail -20 "$work/prev-build.log" >&2; fail "make package of HEAD^"; }
        prev=$(ls "$work"/prev-tree/dist/registrar-otel_*~prev_*.deb)
    else
        step "HEAD^ has no packaging: the previous package is this tree's at $version~prev"
        make -C "$root" package PKG_VERSION="$version~prev" >"$work/prev-build.log" 2>&1 \
            || { tail -20 "$work/prev-build.log" >&2; fail "make package PKG_VERSION=$version~prev"; }
        prev=$(ls "$root"/dist/registrar-otel_"$version"~prev_*.deb)
    fi
fi
step "upgrade: $(basename "$prev") then $(basename "$deb")"
dpkg -i "$prev" >"$work/prev-install.log" 2>&1 || { cat "$work/prev-install.log" >&2; fail "dpkg -i $prev"; }
echo "# edited by the operator (acceptance test)" >>/etc/registrar-otel/registrar.toml
start_daemon
mint h2 first_mint
stop_daemon
dpkg --force-confdef --force-confold -i "$deb" >"$work/upgrade.log" 2>&1 || { cat "$work/upgrade.log" >&2; fail "upgrade"; }
grep -q "edited by the operator" /etc/registrar-otel/registrar.toml || fail "the upgrade replaced the edited conffile"
want_stat /etc/registrar-otel/registrar.toml root:registrar-otel 640
start_daemon
mint h2 idempotent_remint
stop_daemon
step "PASS"
