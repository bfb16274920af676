#!/usr/bin/env bash
# make demo: run an example (default examples/fix-median; `scripts/demo.sh parallel-workers`)
# with the scripted model and print the verified diff.
# The example's repo/ is plain files in this checkout; the demo copies it to a
# scratch directory and makes it a git repository, so this checkout is never touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
example=${1:-fix-median}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/agent-runner-demo.XXXXXX")
cp -r "$root/examples/$example/." "$scratch/"
git -C "$scratch/repo" init -q -b main
git -C "$scratch/repo" add -A
git -C "$scratch/repo" -c user.name=demo -c user.email=demo@localhost commit -q -m "initial"
set +e
node "$root/dist/cli/main.js" exec "$scratch/task.yaml" | tee "$scratch/summary.txt"
status=${PIPESTATUS[0]}
set -e
# This run's directory, from its own summary (other runs may share RUNNER_HOME).
report=$(sed -n 's/^run directory: //p' "$scratch/summary.txt")/
[ "$report" != "/" ] || exit "$status"
echo
echo "=== verified diff (${report}patch.diff) ==="
cat "${report}patch.diff"
echo "=== branch in $scratch/repo ==="
git -C "$scratch/repo" branch --list 'runner/*'
exit $status
