#!/usr/bin/env bash
# On the device: evaluate the waiting candidates of each run directory given (`triforge astra evaluate`),
# then pack their result files into $OUT/NAME-results.tgz (`tar xzf NAME-results.tgz -C DIR` here).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -d /tmp/wl ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wl .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/wl PYTHONUNBUFFERED=1
for d in "$@"; do
  n=$(basename "$d")
  python3 -m triforge.cli.app astra evaluate "$d" > "$OUT/$n-evaluate.log" 2>&1; echo "$d: evaluate rc=$?"
  tail -5 "$OUT/$n-evaluate.log"
  (cd "$d" && tar czf "$OUT/$n-results.tgz" $(find candidates -name result.json))
done
