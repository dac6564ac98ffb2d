#!/usr/bin/env bash
# make systemd-check: the package's systemd claims, proven under a real
# systemd (Debian bookworm's, 252) booted as PID 1 of a systemd-nspawn
# container, black-box with systemctl and journalctl.
#
#   packaging/test/systemd-check.sh dist/registrar-otel_<version>_<arch>.deb
#
# As root. It installs systemd-container and debootstrap when missing, keeps
# the container's root file system under var/systemd-check/rootfs (made once
# with debootstrap from the Debian mirror apt uses; delete it to make it
# again), boots a copy of it, installs the package there, and runs each
# claim as one named step that prints PASS or FAIL. The container is powered
# off and its copy removed at the end, whatever happened. Exit 0 when every
# step passed, 1 otherwise; a host that cannot run it (not root, no
# systemd-nspawn) is a skip with the reason, exit 0.
set -uo pipefail

deb=${1:?usage: systemd-check.sh PACKAGE.deb}
root=$(cd "$(dirname "$0")/../.." && pwd)
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
cache=${SYSTEMD_CHECK_CACHE:-$root/var/systemd-check}
rootfs=$cache/rootfs
sock=/run/registrar-otel/registrar.sock
conf=/etc/registrar-otel/registrar.toml

say() { echo "systemd-check: $*"; }
[ "$(id -u)" = 0 ] || { say "skipped: needs root (debootstrap, systemd-nspawn)"; exit 0; }
[ -f "$deb" ] || { say "no package at $deb (make package)"; exit 1; }

need=()
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
        { say "skipped: cannot install ${need[*]}"; exit 0; }
fi

# The mirror apt is configured with (deb822 or one-line sources).
mirror() {
    local m
    m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1)
    [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | grep -v security | head -1)
    echo "${m:-http://deb.debian.org/debian}"
}

if [ ! -f "$rootfs/.registrar-systemd-check" ]; then
    say "making the container's root file system with debootstrap (once; cached in $rootfs)"
    rm -rf "$rootfs" "$rootfs.tmp"
    mkdir -p "$cache"
    if ! debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,adduser,procps,curl,iproute2 \
        bookworm "$rootfs.tmp" "$(mirror)" >"$cache/debootstrap.log" 2>&1; then
        tail -20 "$cache/debootstrap.log"
        say "FAIL: debootstrap (log: $cache/debootstrap.log)"
        exit 1
    fi
    touch "$rootfs.tmp/.registrar-systemd-check"
    mv "$rootfs.tmp" "$rootfs"
fi

work=$(mktemp -d "$cache/run.XXXXXX")
machine=$work/root
# A fresh copy per run: nothing of a previous run's install is left.
cp -a "$rootfs" "$machine" || { say "FAIL: copying the root file system"; rm -rf "$work"; exit 1; }
nspawn_pid=
pid1=
failed=()
passed=0

poweroff() {
    [ -n "$nspawn_pid" ] || return 0
    kill -TERM "$nspawn_pid" 2>/dev/null # nspawn asks the container's init to power off
    for _ in $(seq 150); do
        kill -0 "$nspawn_pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL "$nspawn_pid" 2>/dev/null
    wait "$nspawn_pid" 2>/dev/null
    nspawn_pid='' pid1=''
}
cleanup() {
    poweroff
    rm -rf "$work"
}
trap cleanup EXIT

# boot starts the container and waits for its systemd to finish booting.
boot() {
    systemd-nspawn --register=no --keep-unit --private-network -q -D "$machine" -b >>"$work/console.log" 2>&1 &
    nspawn_pid=$!
    for _ in $(seq 100); do
        pid1=$(pgrep -P "$nspawn_pid" -x systemd | head -1) # not the outer child that sets the container up
        [ -n "$pid1" ] && break
        sleep 0.1
    done
    [ -n "$pid1" ] || { say "FAIL: the container did not start (console: $work/console.log)"; tail -20 "$work/console.log"; return 1; }
    # Until its manager answers on the bus, then until it has booted
    # ("degraded" is fine: the checks are ours).
    local state=
    for _ in $(seq 300); do
        state=$(ctr systemctl is-system-running --wait 2>/dev/null)
        case $state in running | degraded) return 0 ;; esac
        sleep 0.1
    done
    say "FAIL: the container's systemd did not finish booting ($state; console: $work/console.log)"
    return 1
}

# ctr runs a command in the container.
ctr() { nsenter -t "$pid1" -a -- "$@"; }
as() { local u=$1; shift; ctr runuser -u "$u" -- "$@"; }
mint() { as "$1" registrar-otel mint --socket "$sock" --service-name review --host "$2" --component collector; }
unit() { ctr systemctl show -p "$1" --value registrar-otel.service; }
# wait_for SECONDS CMD...: until CMD succeeds, polled every 0.2 s.
wait_for() {
    local n=$(($1 * 5))
    shift
    for _ in $(seq "$n"); do "$@" && return 0; sleep 0.2; done
    return 1
}

# step NAME FUNCTION: one claim, PASS or FAIL with what it saw.
# The function runs in this shell (a reboot changes pid1), its output kept
# for a failure and its last line shown for a pass.
step() {
    local name=$1
    shift
    if "$@" >"$work/step.out" 2>&1; then
        say "PASS $name$(tail -1 "$work/step.out" | sed 's/^./ (&/; s/.$/&)/')"
        passed=$((passed + 1))
    else
        say "FAIL $name"
        sed 's/^/    /' "$work/step.out" | tail -30
        failed+=("$name")
        restore >/dev/null 2>&1
    fi
}

# restore puts the installed system back as the install step left it, so a
# failed step does not fail the next ones.
restore() {
    cp "$work/registrar.toml.good" "$machine$conf"
    rm -rf "$machine/etc/systemd/system/registrar-otel.service.d"
    ctr systemctl daemon-reload
    ctr systemctl reset-failed registrar-otel.service registrar-otel.socket
    ctr systemctl unmask registrar-otel.socket
    ctr systemctl enable --now registrar-otel.socket
    ctr systemctl restart registrar-otel.service
}

boot || exit 1
say "booted $(ctr systemctl --version | head -1) in a container (PID 1 is $pid1 on the host)"

# --- install -----------------------------------------------------------
install_package() {
    cp "$deb" "$machine/root/registrar-otel.deb"
    ctr dpkg -i /root/registrar-otel.deb >/dev/null || return 1
    ctr adduser --disabled-password --gecos "" alice >/dev/null
    ctr adduser --disabled-password --gecos "" bob >/dev/null
    ctr adduser alice registrar-callers >/dev/null
    cp "$machine$conf" "$work/registrar.toml.good"
    # As docs/en/service.md says: both units enabled and started.
    ctr systemctl enable --now registrar-otel.socket registrar-otel.service
}
step install install_package

verify_units() {
    local out exposure
    out=$(ctr systemd-analyze verify /lib/systemd/system/registrar-otel.service /lib/systemd/system/registrar-otel.socket 2>&1)
    [ -z "$out" ] || { echo "systemd-analyze verify is not silent:"; echo "$out"; return 1; }
    exposure=$(ctr systemd-analyze security --no-pager registrar-otel.service | sed -n 's/.*Overall exposure level for registrar-otel.service: \([0-9.]*\).*/\1/p')
    echo "exposure $exposure"
    [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || { echo "exposure ${exposure:-unreadable}, want at most 2.0"; return 1; }
}
step verify-and-security verify_units

# The install page's check, as root, judges for the unit's user.
config_check_as_root() {
    local out
    out=$(ctr registrar-otel config check --config "$conf") || { echo "$out"; return 1; }
    grep -q 'judged for: registrar-otel' <<<"$out" || { echo "$out"; return 1; }
    grep 'judged for' <<<"$out"
}
step config-check-as-root config_check_as_root

# active only once the socket answers and /readyz is 200: checked the
# instant systemctl returns from a restart.
ready_when_active() {
    ctr systemctl restart registrar-otel.service || return 1
    local h r
    h=$(ctr curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" http://registrar/v1/health)
    r=$(ctr curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9464/readyz)
    echo "active=$(unit ActiveState) health=$h readyz=$r"
    [ "$(unit ActiveState)" = active ] && [ "$h" = 200 ] && [ "$r" = 200 ]
}
step active-once-ready ready_when_active

status_text() {
    local s
    s=$(unit StatusText)
    echo "StatusText=$s"
    case $s in serving*) return 0 ;; esac
    return 1
}
step status-text status_text

# --- a boot with both units enabled --------------------------------------
after_reboot() {
    poweroff
    boot || return 1
    ctr ls -l "$sock"
    mint alice h1 >/dev/null || { echo "alice's first mint after the boot failed"; mint alice h1; return 1; }
    mint alice h1 >/dev/null || { echo "alice's second mint after the boot failed"; mint alice h1; return 1; }
    local out
    if out=$(mint bob h2 2>&1); then
        echo "bob, in no group, minted"
        return 1
    fi
    grep -q 'permission denied' <<<"$out" || { echo "bob's refusal: $out"; return 1; }
}
step reboot-callers-keep-the-socket after_reboot

socket_activation() {
    ctr systemctl stop registrar-otel.service || return 1
    [ "$(unit ActiveState)" = inactive ] || { echo "service $(unit ActiveState) after stop"; return 1; }
    mint alice h3 >/dev/null || { mint alice h3; return 1; }
    [ "$(unit ActiveState)" = active ] || { echo "service $(unit ActiveState) after the call"; return 1; }
    echo "the stopped service was started by a caller's mint, which succeeded"
}
step socket-activation-starts-the-service socket_activation

# 320 mints from 4 callers at once, across two restarts: none refused.
queue_across_restarts() {
    local loop pids=()
    for loop in 1 2 3 4; do
        (
            bad=0
            for i in $(seq 80); do mint alice "q$loop-$i" >/dev/null 2>&1 || bad=$((bad + 1)); done
            echo "$bad" >"$work/queue.$loop"
        ) &
        pids+=($!)
    done
    sleep 1
    ctr systemctl restart registrar-otel.service
    sleep 1
    ctr systemctl restart registrar-otel.service
    wait "${pids[@]}"
    local bad
    bad=$(cat "$work"/queue.* | awk '{s += $1} END {print s}')
    echo "$((320 - bad)) of 320 mints answered across two restarts"
    [ "$bad" = 0 ]
}
step callers-queue-across-restart queue_across_restarts

# systemctl reload applies a lowered limit live, the bucket's state kept,
# and fails when the daemon refuses the new configuration.
admission() { ctr registrar-otel limits show --socket "$sock" --identity "unix-peer:uid=$(ctr id -u alice)" | awk '$1 == "mint" && $2 == "admission" {print $4}'; }
reload_live() {
    for i in $(seq 150); do mint alice "r$i" >/dev/null || { echo "mint r$i failed"; return 1; }; done
    local before after
    before=$(admission)
    sed -i 's/^\[registrar\]$/[registrar]\nrate_limit_admission_burst = 450/' "$machine$conf"
    ctr systemctl reload registrar-otel.service || { echo "systemctl reload of a good configuration failed"; return 1; }
    after=$(admission)
    echo "alice's mint admission bucket: $before before, $after after the reload"
    [ "${after#*/}" = 450 ] || { echo "burst ${after#*/}, want 450"; return 1; }
    [ "${after%/*}" -lt 440 ] || { echo "tokens ${after%/*}: the bucket was refilled, not kept"; return 1; }
    cp "$machine$conf" "$work/registrar.toml.reloaded"
    sed -i 's/^rate_limit_admission_burst = 450$/rate_limit_admission_burst = "many"/' "$machine$conf"
    if ctr systemctl reload registrar-otel.service 2>/dev/null; then
        echo "systemctl reload of a refused configuration exited 0"
        return 1
    fi
    [ "$(unit ActiveState)" = active ] || { echo "service $(unit ActiveState) after the refused reload"; return 1; }
    after=$(admission)
    [ "${after#*/}" = 450 ] || { echo "burst ${after#*/} after the refused reload, want 450 kept"; return 1; }
    cp "$work/registrar.toml.good" "$machine$conf"
    ctr systemctl reload registrar-otel.service
}
step reload-live-and-refused reload_live

# A broken configuration: exit 2, no restart loop; with the socket unit,
# callers do not fail it, systemctl status names the error, and fixing the
# file and starting the service is enough.
broken_configuration() {
    sed -i 's/multiplicity = "one-per-host"/multiplicity = "bogus"/' "$machine$conf"
    if ctr systemctl restart registrar-otel.service 2>/dev/null; then
        echo "the service started on a broken configuration"
        return 1
    fi
    # Each caller's connection starts the service once (its one resend
    # once more); the failed start closes it, and the next caller waits
    # for nothing.
    mint alice b1 >/dev/null 2>&1
    mint alice b2 >/dev/null 2>&1
    mint alice b3 >/dev/null 2>&1
    settled() { [ "$(unit ActiveState)" = failed ]; }
    wait_for 15 settled
    echo "service: $(unit ActiveState)/$(unit Result), ExecMainStatus=$(unit ExecMainStatus), NRestarts=$(unit NRestarts); socket: $(ctr systemctl is-active registrar-otel.socket)"
    [ "$(unit ActiveState)" = failed ] && [ "$(unit ExecMainStatus)" = 2 ] && [ "$(unit NRestarts)" = 0 ] || return 1
    [ "$(ctr systemctl is-active registrar-otel.socket)" = active ] || { echo "the callers failed the socket unit"; return 1; }
    local st
    st=$(ctr systemctl status --no-pager -n 20 registrar-otel.service) # exit 3: the unit failed
    grep -q 'multiplicity' <<<"$st" || { echo "systemctl status does not name the error:"; echo "$st"; return 1; }
    cp "$work/registrar.toml.good" "$machine$conf"
    ctr systemctl start registrar-otel.service || { echo "systemctl start after the fix failed"; return 1; }
    mint alice b4 >/dev/null || { mint alice b4; return 1; }
}
step broken-configuration-is-visible-and-recovers broken_configuration

# The watchdog (3 s here, by a drop-in) kills a stopped daemon, and the unit
# restarts it.
watchdog_restarts() {
    mkdir -p "$machine/etc/systemd/system/registrar-otel.service.d"
    printf '[Service]\nWatchdogSec=3s\n' >"$machine/etc/systemd/system/registrar-otel.service.d/watchdog.conf"
    ctr systemctl daemon-reload
    ctr systemctl restart registrar-otel.service || return 1
    local old restarts
    old=$(unit MainPID)
    restarts=$(unit NRestarts)
    ctr kill -STOP "$old"
    restarted() { [ "$(unit NRestarts)" -gt "$restarts" ] && [ "$(unit ActiveState)" = active ] && [ "$(unit MainPID)" != "$old" ]; }
    wait_for 90 restarted || { echo "not restarted: $(unit ActiveState)/$(unit Result), NRestarts=$(unit NRestarts), ExecMainStatus=$(unit ExecMainStatus)"; return 1; }
    local journal
    journal=$(ctr journalctl -u registrar-otel.service -o cat --no-pager)
    grep -q '"msg":"SIGABRT' <<<"$journal" || { echo "no SIGABRT line in the journal"; return 1; }
    grep -q 'status=134' <<<"$journal" || { echo "systemd did not see exit 134"; return 1; }
    echo "pid $old stopped, killed by the watchdog's SIGABRT, restarted as $(unit MainPID)"
    rm -rf "$machine/etc/systemd/system/registrar-otel.service.d"
    ctr systemctl daemon-reload
    ctr systemctl restart registrar-otel.service
    mint alice w1 >/dev/null
}
step watchdog-kills-and-restarts watchdog_restarts

# journalctl -p err: the daemon's error lines and only those.
journal_priorities() {
    local err info
    err=$(ctr journalctl _SYSTEMD_UNIT=registrar-otel.service -p err -o cat --no-pager)
    info=$(ctr journalctl _SYSTEMD_UNIT=registrar-otel.service -p info -o cat --no-pager)
    echo "$(echo "$err" | grep -c .) lines at err or above, $(echo "$info" | grep -c .) at info or above"
    grep -q '"level":"ERROR"' <<<"$err" || { echo "no ERROR line at priority err"; return 1; }
    grep -q 'multiplicity' <<<"$err" || { echo "the configuration error is not at priority err"; return 1; }
    if grep -q '"level":"\(INFO\|WARN\|DEBUG\)"' <<<"$err"; then
        echo "lines below ERROR at priority err:"
        echo "$err" | grep '"level":"\(INFO\|WARN\|DEBUG\)"' | head -5
        return 1
    fi
    grep -q '"msg":"registrar-otel serving"' <<<"$info" || { echo "the serving line is not at priority info"; return 1; }
}
step journal-priorities journal_priorities

# registrar.socket_group, the daemon binding the socket itself (no socket
# unit), under the shipped unit.
socket_group() {
    # Masked, not only disabled: the service's Wants= would start it again.
    ctr systemctl stop registrar-otel.service registrar-otel.socket
    ctr systemctl mask registrar-otel.socket >/dev/null 2>&1
    ctr rm -f "$sock"
    sed -i 's/^\[registrar\]$/[registrar]\nsocket_group = "registrar-callers"/' "$machine$conf"
    ctr systemctl start registrar-otel.service || { ctr journalctl -u registrar-otel.service -n 5 -o cat --no-pager; return 1; }
    case $(unit StatusText) in *"socket from systemd"*) echo "the socket came from systemd: $(unit StatusText)"; return 1 ;; esac
    ctr stat -c '%U:%G %a %n' "$sock"
    [ "$(ctr stat -c '%G' "$sock")" = registrar-callers ] || return 1
    mint alice g1 >/dev/null || { mint alice g1; return 1; }
    if mint bob g2 >/dev/null 2>&1; then echo "bob minted"; return 1; fi
    cp "$work/registrar.toml.good" "$machine$conf"
    ctr systemctl stop registrar-otel.service
    ctr systemctl unmask registrar-otel.socket >/dev/null 2>&1
    ctr systemctl enable --now registrar-otel.socket >/dev/null 2>&1
    echo "the daemon's own socket in group registrar-callers: alice minted, bob was refused"
}
step socket-group-without-the-socket-unit socket_group

total=$((passed + ${#failed[@]}))
if [ ${#failed[@]} -gt 0 ]; then
    say "FAIL: ${#failed[@]} of $total steps failed: ${failed[*]}"
    exit 1
fi
say "PASS: all $total steps"
