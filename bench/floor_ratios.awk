# bench/floor_ratios.awk — the flood benchmark's headline figure: for each
# flood, connection count and server, the ratio floor / server of ns/op
# (throughput) and of cpu-ns/op (CPU time per answer) within each pass,
# then the median, minimum and maximum of those per-pass ratios; for the
# paired sub-benchmark (floor and daemon alternating every 1024 answers
# within one run), the daemon/floor ratios it reports itself.
#
#   awk -f bench/floor_ratios.awk var/bench/passes.txt
#
# The k-th result of a benchmark in the file is its k-th pass: the passes
# interleave the servers (bench/interleaved.sh), so each ratio compares two
# measurements taken seconds apart.
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]
		a[j+1] = t
	}
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
$1 ~ /^BenchmarkFlood\// {
	name = $1
	sub(/-[0-9]+$/, "", name)
	n = split(name, part, "/")
	server = part[n]
	sub(/^server=/, "", server)
	group = part[2] "/" part[3]
	ns = ""; cpu = ""; pw = ""; pc = ""
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "ns/op") ns = $i
		if ($(i+1) == "cpu-ns/op") cpu = $i
		if ($(i+1) == "daemon/floor") pw = $i
		if ($(i+1) == "daemon/floor-cpu") pc = $i
	}
	if (server == "paired") {
		# The paired run measures its own ratio, floor and daemon
		# alternating every 1024 answers: taken as reported.
		k = ++pseen[group]
		pwall[group, k] = pw
		pcpu[group, k] = pc
		if (!(group in order)) { order[group] = ++ngroups; groups[ngroups] = group }
		next
	}
	k = ++seen[group, server]
	wall[group, server, k] = ns
	cput[group, server, k] = cpu
	if (!(group in order)) { order[group] = ++ngroups; groups[ngroups] = group }
	if (!((group, server) in known)) { known[group, server] = 1; nservers[group]++; servers[group, nservers[group]] = server }
}
END {
	if (ngroups == 0) exit
	printf "%-22s %-16s %6s %22s %22s\n", "flood/connections", "server", "passes", "floor/server (ns/op)", "floor/server (cpu)"
	for (g = 1; g <= ngroups; g++) {
		group = groups[g]
		for (s = 1; s <= nservers[group]; s++) {
			server = servers[group, s]
			if (server == "floor") continue
			m = 0
			for (k = 1; k <= seen[group, server] && k <= seen[group, "floor"]; k++) {
				if (wall[group, server, k] > 0) {
					m++
					rw[m] = wall[group, "floor", k] / wall[group, server, k]
					rc[m] = cput[group, server, k] > 0 ? cput[group, "floor", k] / cput[group, server, k] : 0
				}
			}
			report(group, server, m)
		}
		m = 0
		for (k = 1; k <= pseen[group]; k++) { m++; rw[m] = pwall[group, k]; rc[m] = pcpu[group, k] + 0 }
		report(group, "paired", m)
	}
}
function report(group, server, m,    k, lo, hi, clo, chi) {
	if (m == 0) return
	lo = hi = rw[1]; clo = chi = rc[1]
	for (k = 1; k <= m; k++) {
		if (rw[k] < lo) lo = rw[k]; if (rw[k] > hi) hi = rw[k]
		if (rc[k] < clo) clo = rc[k]; if (rc[k] > chi) chi = rc[k]
	}
	printf "%-22s %-16s %6d   %.3f (%.3f–%.3f)    %.3f (%.3f–%.3f)\n", group, server, m, median(rw, m), lo, hi, median(rc, m), clo, chi
}
