#!/usr/bin/env bash
# make mutate-hand: the hand-made mutants of tools/mutate/hand-mutants.txt,
# one at a time, each in a scratch copy of the working tree (committed and
# uncommitted files alike; the tree itself is never touched). For each one:
# the named tests must pass on the code as it is and fail with the mutant.
#
# Prints one line per mutant: killed (with the tests that went red), LIVED,
# STALE (the substitution no longer matches the file), or DOES NOT BUILD.
# Exits 0 when every mutant was killed, 1 when one lived, 2 when one is
# stale, does not build, or a test fails without it (or on a usage error).
#
# Environment: GO (default go), MUTANTS (a comma-separated list of names;
# default all), HAND_MUTANTS (the file; default tools/mutate/hand-mutants.txt),
# HAND_CHECK=apply (only check that each substitution still changes its
# file, running no test: seconds, so make test runs it and a mutant cannot
# go stale unnoticed).
set -uo pipefail

cd "$(dirname "$0")/../.."
GO=${GO:-go}
FILE=${HAND_MUTANTS:-tools/mutate/hand-mutants.txt}
WANT=",${MUTANTS:-},"

if [[ ! -f $FILE ]]; then
	echo "mutate-hand: $FILE: no such file" >&2
	exit 2
fi
command -v perl >/dev/null || { echo "mutate-hand: perl is needed to apply the substitutions" >&2; exit 2; }

# shellcheck source=tools/mutate/scratch.sh
. tools/mutate/scratch.sh # the working directory is the repository
scratch_tree || { echo "mutate-hand: copying the tree failed" >&2; exit 2; }

# runtests PKG REGEXP: go test's output in $out, its status returned.
runtests() {
	out=$(cd "$scratch" && "$GO" test -count=1 -run "$2" "$1" 2>&1 | tr -d '\0')
}

killed=0 lived=0 broken=0
check() { # the current block
	local name=$1 claim=$2 file=$3 sub=$4 pkg=$5 re=$6
	if [[ -z $name || -z $file || -z $sub || -z $pkg || -z $re ]]; then
		echo "mutate-hand: $FILE: the block of mutant '${name:-?}' lacks one of file, perl, package, test" >&2
		exit 2
	fi
	[[ $WANT == ",," || $WANT == *",$name,"* ]] || return 0
	local orig=$scratch/$file
	if [[ ! -f $orig ]]; then
		printf '%-34s STALE: %s is not in the tree\n' "$name" "$file"
		broken=$((broken + 1)); return
	fi
	local start=$SECONDS
	if [[ ${HAND_CHECK:-} == apply ]]; then
		if perl -0pe "$sub" "$orig" | cmp -s - "$orig"; then
			printf '%-34s STALE: the substitution no longer matches %s\n' "$name" "$file"
			broken=$((broken + 1))
		else
			killed=$((killed + 1))
		fi
		return
	fi
	if ! runtests "$pkg" "$re"; then
		printf '%-34s FAILS WITHOUT THE MUTANT: %s -run %s\n' "$name" "$pkg" "$re"
		printf '%s\n' "$out" | tail -20 | sed 's/^/    /'
		broken=$((broken + 1)); return
	fi
	if ! grep -q -- '^ok\|^--- PASS\|^PASS' <<<"$out" || grep -q 'no tests to run' <<<"$out"; then
		printf '%-34s STALE: %s -run %s runs no test\n' "$name" "$pkg" "$re"
		broken=$((broken + 1)); return
	fi
	cp "$orig" "$scratch/.orig"
	perl -0pi -e "$sub" "$orig"
	if cmp -s "$orig" "$scratch/.orig"; then
		printf '%-34s STALE: the substitution no longer matches %s\n' "$name" "$file"
		broken=$((broken + 1)); return
	fi
	runtests "$pkg" "$re"
	local rc=$?
	cp "$scratch/.orig" "$orig"
	local red
	# The top-level tests that failed: the first four, and how many more.
	red=$(grep -o -- '--- FAIL: [^ ]*' <<<"$out" | sed 's/--- FAIL: //' | grep -v / | sort -u |
		awk '{ n++; if (n <= 4) s = s (n > 1 ? " " : "") $0 } END { if (n > 4) s = s " (+" n - 4 " more)"; print s }')
	if [[ $rc -ne 0 && -n $red ]]; then
		printf '%-34s killed   %3ds  by %s\n' "$name" $((SECONDS - start)) "$red"
		killed=$((killed + 1))
	elif [[ $rc -ne 0 ]]; then
		printf '%-34s DOES NOT BUILD (or no test reported a failure): fix the substitution\n' "$name"
		printf '%s\n' "$out" | tail -10 | sed 's/^/    /'
		broken=$((broken + 1))
	else
		printf '%-34s LIVED    %3ds  %s (%s in %s): no test holds "%s"\n' "$name" $((SECONDS - start)) "$file" "$sub" "$pkg" "$claim"
		lived=$((lived + 1))
	fi
}

name= claim= file= sub= pkg= re=
while IFS= read -r line || [[ -n $line ]]; do
	[[ $line =~ ^[[:space:]]*# ]] && continue
	if [[ -z ${line//[[:space:]]/} ]]; then
		[[ -n $name ]] && check "$name" "$claim" "$file" "$sub" "$pkg" "$re"
		name= claim= file= sub= pkg= re=
		continue
	fi
	key=${line%%[[:space:]]*}
	val=${line#"$key"}
	val=${val#"${val%%[![:space:]]*}"}
	case $key in
	mutant) name=$val ;;
	claim) claim=$val ;;
	file) file=$val ;;
	perl) sub=$val ;;
	package) pkg=$val ;;
	test) re=$val ;;
	*)
		echo "mutate-hand: $FILE: unknown key '$key' (mutant, claim, file, perl, package, test)" >&2
		exit 2
		;;
	esac
done <"$FILE"
[[ -n $name ]] && check "$name" "$claim" "$file" "$sub" "$pkg" "$re"

if [[ ${HAND_CHECK:-} == apply ]]; then
	echo "mutate-hand: $killed mutants of $FILE apply, $broken stale (HAND_CHECK=apply: no test run)"
	((broken == 0)) || exit 2
	exit 0
fi
echo
echo "== mutate-hand: $killed killed, $lived lived, $broken stale or broken ($FILE)"
if ((broken > 0)); then exit 2; fi
if ((lived > 0)); then exit 1; fi
if ((killed == 0)); then
	echo "mutate-hand: no mutant ran (MUTANTS=${MUTANTS:-} names none of $FILE)" >&2
	exit 2
fi
