#!/usr/bin/env bash
# tools/mutate/cases.sh PKG LIST: run the mutants gremlins reports as NOT
# COVERED but that sit on lines the tests run (make mutate finds them with
# a coverage profile): the conditions of switch cases, which Go's coverage
# blocks leave out, so gremlins never runs a mutant there.
#
# LIST has one mutant per line, "MUTATOR FILE LINE COL" (FILE relative to
# the package, LINE and COL 1-based bytes, as gremlins prints them). Each is
# applied as gremlins would (the operator at LINE:COL replaced) to a scratch
# copy of the working tree, and the package's tests are run against it,
# with a timeout of COEFFICIENT times the unmutated run (at least 30 s).
# Prints one line per mutant in gremlins' form, for make mutate to count:
#
#   KILLED CONDITIONALS_BOUNDARY at capacity.go:98:12
#
# with LIVED, TIMED OUT, NOT VIABLE (the mutant does not build) or SKIPPED
# (an operator or mutator this script does not make) in place of KILLED.
# Exits 2 when the unmutated tests fail or the tree cannot be copied.
set -uo pipefail

cd "$(dirname "$0")/../.."
GO=${GO:-go}
COEFFICIENT=${COEFFICIENT:-10}
rel=$1
list=$2
[[ -s $list ]] || exit 0

# shellcheck source=tools/mutate/scratch.sh
. tools/mutate/scratch.sh # the working directory is the repository
scratch_tree || { echo "mutate: copying the tree for $rel's case mutants failed" >&2; exit 2; }

start=$(date +%s%N)
if ! (cd "$scratch" && "$GO" test -count=1 -cpu 1 "./$rel" >/dev/null 2>&1); then
	echo "mutate: $rel's tests fail on a copy of the tree without any mutant" >&2
	exit 2
fi
base=$((($(date +%s%N) - start) / 1000000000 + 1))
limit=$((base * COEFFICIENT))
((limit >= 30)) || limit=30

# replacement MUTATOR OPERATOR: gremlins' replacement, or nothing.
replacement() {
	case "$1 $2" in
	"CONDITIONALS_BOUNDARY <") echo "<=" ;;
	"CONDITIONALS_BOUNDARY <=") echo "<" ;;
	"CONDITIONALS_BOUNDARY >") echo ">=" ;;
	"CONDITIONALS_BOUNDARY >=") echo ">" ;;
	"CONDITIONALS_NEGATION ==") echo "!=" ;;
	"CONDITIONALS_NEGATION !=") echo "==" ;;
	"CONDITIONALS_NEGATION <") echo ">=" ;;
	"CONDITIONALS_NEGATION <=") echo ">" ;;
	"CONDITIONALS_NEGATION >") echo "<=" ;;
	"CONDITIONALS_NEGATION >=") echo "<" ;;
	"ARITHMETIC_BASE +") echo "-" ;;
	"ARITHMETIC_BASE -") echo "+" ;;
	"ARITHMETIC_BASE *") echo "/" ;;
	"ARITHMETIC_BASE /") echo "*" ;;
	"ARITHMETIC_BASE %") echo "*" ;;
	esac
}

while read -r mut file line col; do
	[[ -n ${col:-} ]] || continue
	path=$scratch/$rel/$file
	where="$mut at $file:$line:$col"
	text=$(sed -n "${line}p" "$path" 2>/dev/null)
	# The operator at COL: two bytes when they form one (<=, >=, ==, !=).
	op=${text:col-1:2}
	case $op in
	"<=" | ">=" | "==" | "!=") ;;
	*) op=${text:col-1:1} ;;
	esac
	new=$(replacement "$mut" "$op")
	if [[ -z $new ]]; then
		echo "SKIPPED $where"
		continue
	fi
	cp "$path" "$scratch/.orig"
	OP=$op NEW=$new L=$line C=$col perl -pi -e \
		'if ($. == $ENV{L}) { substr($_, $ENV{C} - 1, length $ENV{OP}) = $ENV{NEW} }' "$path"
	# pipefail: the status is go test's (or timeout's 124), not tr's.
	out=$(cd "$scratch" && timeout "$limit" "$GO" test -count=1 -failfast -cpu 1 "./$rel" 2>&1 | tr -d '\0')
	rc=$?
	cp "$scratch/.orig" "$path"
	if [[ $rc -eq 0 ]] && grep -q '^ok' <<<"$out"; then
		echo "LIVED $where"
	elif grep -q '\[build failed\]\|\[setup failed\]' <<<"$out"; then
		echo "NOT VIABLE $where"
	elif [[ $rc -eq 124 ]]; then
		echo "TIMED OUT $where"
	else
		echo "KILLED $where"
	fi
done <"$list"
