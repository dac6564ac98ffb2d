# Sourced by tools/mutate/hand.sh and cases.sh (bash).
#
# scratch_tree: a temporary copy of the working tree as it stands
# (committed and uncommitted files, ignored ones such as bin/ and var/ left
# out), for mutants that must never touch the tree itself. Sets $scratch
# and removes it on exit; returns 1 when the copy fails.
scratch_tree() {
	scratch=$(mktemp -d) || return 1
	trap 'rm -rf "$scratch"' EXIT INT TERM
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
		tar --null -T - -cf - | tar -xf - -C "$scratch"
}
