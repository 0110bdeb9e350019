#!/bin/sh
# Issue 33's stress run: the engine's and the list pipeline's tests (and,
# with STRESS_CONTROLLERS=1 and envtest assets, the controllers'), again
# and again, with BUSY busy loops (default 6) beside them, until RUNS runs
# (default 50) or DEADLINE (seconds since the epoch) has passed. Each run's
# output goes to OUT/run-N.log; a summary line per run to OUT/summary.
#
#   EMAILDATA_MAIL_DIR=$PWD/bin/mail hack/stress-engine-tests.sh
set -u
RUNS=${RUNS:-50}
BUSY=${BUSY:-6}
OUT=${OUT:-/tmp/stress-engine}
DEADLINE=${DEADLINE:-0}
PKGS="./internal/engine/... ./internal/lists/pipeline/"
if [ "${STRESS_CONTROLLERS:-0}" = 1 ]; then
	PKGS="$PKGS ./controllers/..."
fi
mkdir -p "$OUT"
busy=""
i=0
while [ "$i" -lt "$BUSY" ]; do
	sh -c 'while :; do :; done' &
	busy="$busy $!"
	i=$((i + 1))
done
trap 'kill $busy 2>/dev/null' EXIT
trap 'exit 1' INT TERM
n=0
fails=0
while [ "$n" -lt "$RUNS" ]; do
	if [ "$DEADLINE" -gt 0 ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
		break
	fi
	n=$((n + 1))
	t0=$(date +%s)
	load=$(cut -d' ' -f1 /proc/loadavg)
	# shellcheck disable=SC2086
	if CI=true go test -count=1 $PKGS > "$OUT/run-$n.log" 2>&1; then
		res=ok
	else
		res=FAIL
		fails=$((fails + 1))
	fi
	echo "run $n $res $(( $(date +%s) - t0 ))s load-at-start $load $(grep -E '^(--- FAIL|FAIL)' "$OUT/run-$n.log" | tr '\n' ' ')" >> "$OUT/summary"
done
echo "$n runs, $fails failed" >> "$OUT/summary"
