#!/bin/sh
# make mutate: gremlins over the packages a change touched since BASE (or
# the packages PKGS names), one package at a time, one worker. Prints each
# package's efficacy (killed / (killed + lived), the equivalent mutants of
# mutants-equivalent.txt left out) and every mutant that lived, labelled
# when it is a recorded equivalent. Gremlins never runs a mutant in the
# condition of a switch case (Go's coverage blocks leave it out, so it is
# "NOT COVERED"); a coverage profile of our own finds those on lines the
# tests run, tools/mutate/cases.sh runs them, and they count like the rest
# (CASES=0 leaves them out). Exits 1 when a gated package is below
# THRESHOLD, 2 on a usage or tool error.
#
# Environment (the Makefile passes them): GO, GREMLINS (the pinned module
# path@version), BASE, PKGS, THRESHOLD, COEFFICIENT, EQUIVALENT (the file
# of equivalent mutants), GATED (the packages the threshold applies to),
# SKIP (packages a BASE diff leaves out: cmd/registrar-otel, whose
# end-to-end tests take minutes per mutant; PKGS can still name it).
set -u

GO=${GO:-go}
GREMLINS=${GREMLINS:?GREMLINS unset: run make mutate}
THRESHOLD=${THRESHOLD:-90}
COEFFICIENT=${COEFFICIENT:-10}
EQUIVALENT=${EQUIVALENT:-mutants-equivalent.txt}
GATED=${GATED:-limiter coalesce audit registrar wire server vocab internal/groupcommit health sinks/}
SKIP=${SKIP:-cmd/registrar-otel}
PKGS=${PKGS:-}
CASES=${CASES:-1}
BASE=${BASE:-}
# EXCLUDE: a regexp of files gremlins leaves unmutated (its --exclude-files),
# to mutate only the files a change touched in a package whose full run
# takes most of an hour (make mutate PKGS=./server EXCLUDE='budget|listen').
EXCLUDE=${EXCLUDE:-}
EXCLUDE_ARGS=
[ -n "$EXCLUDE" ] && EXCLUDE_ARGS="--exclude-files $EXCLUDE"

MODPATH=$($GO list -m) || exit 2

if [ -z "$PKGS" ]; then
	if [ -z "$BASE" ]; then
		echo "mutate: no BASE (git merge-base HEAD main failed); set BASE=<commit> or PKGS=<packages>" >&2
		exit 2
	fi
	# The main module's packages with a .go file changed since BASE
	# (committed or not, and new files not yet added); bench/ is its own
	# module.
	PKGS=$({ git diff --name-only "$BASE" -- '*.go'; git ls-files --others --exclude-standard -- '*.go'; } |
		grep -v '^bench/' | grep -v '/testdata/' |
		while read -r f; do d=$(dirname "$f"); [ -d "$d" ] && echo "./$d"; done | sort -u |
		while read -r d; do
			skip=
			for s in $SKIP; do [ "$d" = "./$s" ] && skip=y; done
			if [ -n "$skip" ]; then echo "mutate: skipping ${d#./} (SKIP; name it in PKGS to run it)" >&2; else echo "$d"; fi
		done)
	if [ -z "$PKGS" ]; then
		echo "mutate: no Go package changed since $BASE; name some with PKGS=./coalesce,./health"
		exit 0
	fi
fi
PKGS=$(echo "$PKGS" | tr ',' ' ')

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM

# Gremlins runs each mutant's tests with GOTMPDIR set to its work
# directory (/tmp/gremlins-NNNNNNNNNN), and t.TempDir makes its
# directories beneath GOTMPDIR when it is set (the testing package of the
# Go 1.26 we build with): 20 bytes longer than under /tmp, which puts the
# unix sockets the wire and server tests make in t.TempDir past the
# 107-byte limit of a socket path (bind: invalid argument). The tests then
# fail without any mutant, and every mutant would be reported KILLED.
# Gremlins also takes go test's exit status 1 as KILLED, and go test exits
# 1 on a mutant that does not compile (a string's + made -) as on a
# failing test: gremlins keeps NOT VIABLE for status 2, which go test
# never gives. Gremlins finds go on its PATH: a go of our own first on it
# runs the real one without GOTMPDIR, and turns a test run whose package
# did not build into status 2. Gremlins itself is built once into $out,
# since go run would put the real go's directory first on the PATH it
# gives it.
realgo=$(command -v "$GO") || { echo "mutate: $GO not found" >&2; exit 2; }
mkdir -p "$out/bin" "$out/gopath" || exit 2
{
	echo '#!/bin/sh'
	echo "# make mutate's go for gremlins (tools/mutate/mutate.sh): the real one,"
	echo '# without GOTMPDIR; a test run whose package did not build exits 2.'
	echo 'unset GOTMPDIR'
	echo "[ \"\$1\" = test ] || exec '$realgo' \"\$@\""
	echo "out=\$('$realgo' \"\$@\" 2>&1)"
	echo 'rc=$?'
	echo 'printf "%s\n" "$out"'
	echo 'if [ "$rc" = 1 ] && printf "%s\n" "$out" | grep -q "^FAIL.*\[\(build\|setup\) failed\]$"; then exit 2; fi'
	echo 'exit "$rc"'
} >"$out/gopath/go" && chmod +x "$out/gopath/go" || exit 2
if ! GOBIN="$out/bin" "$realgo" install "$GREMLINS" >"$out/install.txt" 2>&1; then
	cat "$out/install.txt"
	echo "mutate: could not build $GREMLINS" >&2
	exit 2
fi

# gated PKG: 0 when the threshold applies to PKG (a path under the module).
gated() {
	for g in $GATED; do
		case "$g" in
		*/) case "$1/" in "$g"*) return 0 ;; esac ;;
		*) [ "$1" = "$g" ] && return 0 ;;
		esac
	done
	return 1
}

status=0
summary=""
for p in $PKGS; do
	rel=${p#./}
	rel=${rel%/}
	if [ -z "$($GO list -f '{{if or .GoFiles .TestGoFiles .XTestGoFiles}}y{{end}}' "./$rel" 2>/dev/null)" ]; then
		echo "mutate: skipping $rel (no Go package)"
		continue
	fi
	echo "== $rel (gremlins, 1 worker, timeout coefficient $COEFFICIENT)"
	start=$(date +%s)
	# One CPU per test run through GOFLAGS, not gremlins' --test-cpu: v0.6.0
	# passes that as the single argument "-cpu 1", which the test binary
	# refuses ("flag provided but not defined"), so go test exits 1 and
	# every mutant was reported KILLED without a test having run. -count=1
	# keeps gremlins' coverage run, whose time the timeouts are multiples
	# of, from being answered by the test cache.
	# shellcheck disable=SC2086 # EXCLUDE_ARGS is a list of flags
	PATH="$out/gopath:$PATH" GOFLAGS="$($GO env GOFLAGS) -cpu=1 -count=1" "$out/bin/gremlins" unleash --workers 1 --timeout-coefficient "$COEFFICIENT" $EXCLUDE_ARGS \
		"./$rel" >"$out/run.txt" 2>&1
	rc=$?
	if ! grep -q 'Mutator coverage\|Test efficacy\|No results to report' "$out/run.txt"; then
		cat "$out/run.txt"
		echo "mutate: gremlins failed on $rel (exit $rc)" >&2
		exit 2
	fi
	# Gremlins calls a mutant NOT COVERED when its position is in no
	# covered block of its own coverage run. Go's coverage blocks leave out
	# the conditions of switch cases and every package-level constant, so
	# most of those are on lines the tests do run. One coverage run of our
	# own tells them apart: a line inside a block some test ran, a line in
	# no block at all (a package-level expression), and a line no test runs.
	$GO test -count=1 -covermode=set -coverprofile="$out/cover.txt" "./$rel" >/dev/null 2>&1 || : >"$out/cover.txt"
	: >"$out/casemuts.txt"
	uncovered=$(awk -v prefix="$MODPATH/$rel/" -v pkg="$rel" -v casefile="$out/casemuts.txt" -v cover="$out/cover.txt" '
		FILENAME == cover && FNR > 1 {
			# import/path/file.go:L1.C1,L2.C2 STATEMENTS COUNT
			split($1, a, ":"); f = a[1]
			if (index(f, prefix) != 1) next
			f = substr(f, length(prefix) + 1)
			split(a[2], r, ","); split(r[1], b, "."); split(r[2], e, ".")
			for (l = b[1] + 0; l <= e[1] + 0; l++) { inblock[f ":" l] = 1; if ($3 + 0 > 0) ran[f ":" l] = 1 }
			next
		}
		FILENAME != cover && /^ *NOT COVERED / {
			split($NF, loc, ":"); k = loc[1] ":" loc[2]
			if (k in ran) { runs++; print $(NF-2), loc[1], loc[2], loc[3] > casefile }
			else if (k in inblock) { notrun++; if (!(k in seen)) { seen[k] = 1; lines = lines "   not run     " pkg "/" k "\n" } }
			else toplevel++
		}
		END {
			if (runs + notrun + toplevel == 0) exit
			printf "   not covered %d: %d on lines whose statements no test runs, %d on lines that run (switch-case conditions; gremlins cannot place them: make mutate runs them), %d in package-level constants and variables\n%s", \
				runs + notrun + toplevel, notrun, runs, toplevel, lines
		}' "$out/cover.txt" "$out/run.txt")
	# The mutants on lines that run, which gremlins skipped: run here.
	: >"$out/cases.txt"
	if [ "$CASES" != 0 ] && [ -s "$out/casemuts.txt" ]; then
		echo "   running $(wc -l <"$out/casemuts.txt" | tr -d ' ') switch-case mutants gremlins skipped"
		GO=$GO COEFFICIENT=$COEFFICIENT "$(dirname "$0")/cases.sh" "$rel" "$out/casemuts.txt" >"$out/cases.txt" || exit 2
	fi
	secs=$(($(date +%s) - start))
	# Every mutant line: STATUS MUTATOR at FILE:LINE:COL, FILE relative to
	# the package; LIVED ones are matched against the equivalents. The
	# case mutants (cases.txt, read first) replace their NOT COVERED lines
	# in gremlins' report.
	res=$(awk -v pkg="$rel" -v eqfile="$EQUIVALENT" -v cases="$out/cases.txt" '
		BEGIN {
			while ((getline line < eqfile) > 0) {
				if (line ~ /^[ \t]*(#|$)/) continue
				split(line, parts, /[ \t]+(—|--)[ \t]+/)
				key = parts[1]; sub(/[ \t]+$/, "", key)
				eq[key] = substr(line, length(parts[1]) + 1)
				sub(/^[ \t]+(—|--)[ \t]+/, "", eq[key])
			}
		}
		# An empty cases.txt has no first line: tell the files by name.
		{ incases = FILENAME == cases }
		NF >= 4 && $(NF-1) == "at" && $(NF-2) ~ /^[A-Z_]+$/ {
			mut = $(NF-2); st = $1
			for (i = 2; i < NF - 2; i++) st = st " " $i
			if (incases) { ran[$NF ":" mut] = 1; c[st]++ }
			else if (st == "NOT COVERED" && ($NF ":" mut) in ran) next
			n[st]++
			if (st != "LIVED" && st != "TIMED OUT") next
			split($NF, loc, ":")
			key = pkg "/" loc[1] ":" loc[2] ":" mut
			if (st == "LIVED" && key in eq) { n["EQUIV"]++; printf "   equivalent  %s:%s %s — %s\n", pkg "/" loc[1], loc[2] ":" loc[3], mut, eq[key] > "/dev/stderr"; next }
			printf "   %-11s %s:%s %s%s\n", (st == "LIVED" ? "LIVED" : "timed out"), pkg "/" loc[1], loc[2] ":" loc[3], mut, (incases ? " (a switch case, run by make mutate)" : "") > "/dev/stderr"
		}
		END {
			k = n["KILLED"] + 0; l = n["LIVED"] + 0; e = n["EQUIV"] + 0
			# No mutant run: nothing to measure, nothing below the gate.
			eff = (k + l - e) > 0 ? sprintf("%.1f", 100 * k / (k + l - e)) : "n/a"
			printf "%d %d %d %d %d %s\n", k, l - e, e, n["TIMED OUT"] + 0, n["NOT COVERED"] + 0, eff
			cn = c["KILLED"] + c["LIVED"] + c["TIMED OUT"] + c["NOT VIABLE"] + c["SKIPPED"]
			if (cn > 0)
				printf "   switch-case mutants run by make mutate: %d killed, %d lived, %d timed out, %d not viable, %d skipped (counted in the figures above)\n", \
					c["KILLED"], c["LIVED"], c["TIMED OUT"], c["NOT VIABLE"], c["SKIPPED"] > "/dev/stderr"
		}' "$out/cases.txt" "$out/run.txt" 2>"$out/lived.txt")
	if [ -z "$res" ]; then
		cat "$out/run.txt" "$out/lived.txt"
		echo "mutate: could not read gremlins' report on $rel" >&2
		exit 2
	fi
	set -- $res
	killed=$1 lived=$2 equiv=$3 timedout=$4 notcovered=$5 eff=$6
	gate="(not gated)"
	if [ "$eff" = n/a ]; then
		gate="(no mutant ran)"
	elif gated "$rel"; then
		if awk -v e="$eff" -v t="$THRESHOLD" 'BEGIN { exit !(e < t) }'; then
			gate="BELOW the ${THRESHOLD} % threshold"
			status=1
		else
			gate="meets ${THRESHOLD} %"
		fi
	fi
	line=$(printf '%-22s efficacy %5s %%  killed %3d  lived %2d  equivalent %2d  timed out %2d  not covered %3d  %4ds  %s' \
		"$rel" "$eff" "$killed" "$lived" "$equiv" "$timedout" "$notcovered" "$secs" "$gate")
	echo "$line"
	cat "$out/lived.txt"
	[ -z "$uncovered" ] || printf '%s\n' "$uncovered"
	summary="$summary$line
"
done
echo
echo "== mutate summary (efficacy = killed / (killed + lived), equivalents of $EQUIVALENT left out)"
printf '%s' "$summary"
exit $status
