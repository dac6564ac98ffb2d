#!/bin/sh
# bench/interleaved.sh — run every benchmark of both modules in interleaved
# passes and print benchstat's comparisons of the peers (by /server,
# /decoder, /peer, /span, /sealed and /run).
#
# Each package's benchmarks are compiled once into a test binary; then each
# pass runs every binary once (A B C ... A B C ...), so a peer and the thing
# it is compared with are measured minutes apart at most, never one block
# after the other. The raw results of all passes go to $OUT/passes.txt.
#
#   BENCH_PASSES  passes (default 5)
#   BENCH         benchmark regexp (default ".")
#   BENCHTIME     -test.benchtime per benchmark (default 1s)
#   OUT           output directory (default var/bench)
set -eu

passes=${BENCH_PASSES:-5}
filter=${BENCH:-.}
benchtime=${BENCHTIME:-1s}
out=${OUT:-var/bench}
go=${GO:-go}
root=$(pwd)

mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
: > "$out/passes.txt"

# One test binary per package that has benchmarks, in both modules.
list=$out/packages.txt
: > "$list"
for mod in . bench; do
	(cd "$mod" && $go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}} {{.ImportPath}}{{end}}' ./...) |
	while read -r dir pkg; do
		[ -n "$dir" ] || continue
		if grep -qs '^func Benchmark' "$dir"/*_test.go; then
			bin=$out/bin/$(echo "$pkg" | tr '/.' '__').test
			(cd "$dir" && $go test -c -o "$bin" .)
			echo "$dir $bin" >> "$list"
		fi
	done
done

i=1
while [ "$i" -le "$passes" ]; do
	echo "pass $i/$passes" >&2
	while read -r dir bin; do
		(cd "$dir" && "$bin" -test.run='^$' -test.bench="$filter" -test.benchmem -test.benchtime="$benchtime") >> "$out/passes.txt"
	done < "$list"
	i=$((i + 1))
done

benchstat="$go run golang.org/x/perf/cmd/benchstat@latest"
cd "$root"
echo
echo "== all benchmarks, medians over $passes interleaved passes"
$benchstat "$out/passes.txt"
compare() { # key, values joined by " OR "
	if grep -q "/$1=" "$out/passes.txt"; then
		echo
		echo "== peers compared by /$1 (each column against the first)"
		$benchstat -filter "/$1:($2)" -col "/$1" "$out/passes.txt"
	fi
}
compare server "floor OR daemon OR daemon-ratio0"
compare decoder "reference OR single-pass"
compare peer "ours OR xrate OR memstore"
compare span "non-recording OR recording OR recording-sdk-AddEvent-only"
compare sealed "false OR true"
compare run "scan OR verify"
if grep -q '^BenchmarkFlood/' "$out/passes.txt"; then
	echo
	echo "== the flood's headline figure: floor / server within each pass, median (min–max) over $passes passes"
	awk -f bench/floor_ratios.awk "$out/passes.txt"
fi
