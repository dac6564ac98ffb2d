#!/bin/sh
# mint_wave.sh OLD_BIN NEW_BIN [ROUNDS] [MINTS]
#
# Admitted mints per second through the real unix socket on the real disk,
# for two builds, interleaved ABBA (old c=1, new c=1, old c=64, new c=64,
# then the next round new first), each run on a fresh daemon and state. The load client is
# NEW_BIN's `load wave` for every run, so only the daemon differs. Prints
# one line per run: build, concurrency, mints/s.
set -eu
OLD=$1 NEW=$2 ROUNDS=${3:-5} MINTS=${4:-2000}
HOSTS=$((MINTS / 8))
BASE=$(mktemp -d "${TMPDIR:-/tmp}/mintwave-XXXXXX")
trap 'rm -rf "$BASE"' EXIT
run() { # build-name binary concurrency
	d=$(mktemp -d "$BASE/r-XXXXXX")
	cat >"$d/cfg.toml" <<CFG
[registrar]
socket_path = "$d/s.sock"
state_dir = "$d/lib"
audit_record_dir = "$d/audit"
rate_limit_admission_burst = 1000000
[registrar.components.review]
multiplicity = "many-per-host"
[telemetry]
metrics_listen = ""
CFG
	"$2" serve --config "$d/cfg.toml" >"$d/log" 2>&1 &
	pid=$!
	i=0
	while ! grep -q "registrar-otel serving" "$d/log"; do
		i=$((i + 1)); [ $i -lt 600 ] || { cat "$d/log"; exit 1; }
		sleep 0.05
	done
	out=$("$NEW" load wave --socket "$d/s.sock" --hosts "$HOSTS" --modules-per-host 8 \
		--concurrency "$3" --audit-dir - --settle 0s 2>&1)
	kill -TERM $pid; wait $pid || true
	rate=$(printf '%s\n' "$out" | sed -n 's/^requests: *\([0-9]*\) (\([0-9]*\)\/s).*/\2/p')
	adm=$(printf '%s\n' "$out" | sed -n 's/^admitted: *\([0-9]*\).*/\1/p')
	[ "$adm" = "$MINTS" ] || { echo "$1 c=$3: admitted $adm of $MINTS"; printf '%s\n' "$out"; exit 1; }
	echo "$1 c=$3 $rate"
	rm -rf "$d"
}
r=0
while [ $r -lt "$ROUNDS" ]; do
	for c in 1 64; do
		if [ $((r % 2)) -eq 0 ]; then
			run old "$OLD" $c
			run new "$NEW" $c
		else # ABBA: neither build always runs right after the other
			run new "$NEW" $c
			run old "$OLD" $c
		fi
	done
	r=$((r + 1))
done
