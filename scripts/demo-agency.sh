#!/usr/bin/env bash
# make demo-agency: run examples/agency/fix-pipeline (analyst → coder → tester → reviewer, one
# review → fix round, scripted models) and print its timeline and the change merged into agency/<id>.
# The example's repo/ is plain files in this checkout; the demo copies it to a scratch directory
# and makes it a git repository, so this checkout is never touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/agent-runner-demo-agency.XXXXXX")
cp -r "$root/examples/agency/fix-pipeline/." "$scratch/"
git -C "$scratch/repo" init -q -b main
git -C "$scratch/repo" add -A
git -C "$scratch/repo" -c user.name=demo -c user.email=demo@localhost commit -q -m "initial"
set +e
node "$root/dist/cli/main.js" agency run "$scratch/agency.yaml" | tee "$scratch/timeline.txt"
status=${PIPESTATUS[0]}
set -e
id=$(sed -n '1s/^agency //p' "$scratch/timeline.txt")
[ -n "$id" ] || exit "$status"
echo
echo "=== merged into agency/$id (git diff main...agency/$id in $scratch/repo) ==="
git -C "$scratch/repo" diff "main...agency/$id"
exit "$status"
