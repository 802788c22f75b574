#!/bin/sh
# The validation matrix of docs/validation.md: ZeRO stages 0-3 x optimizer offload none/cpu (and
# nvme for stage 3) x gradient accumulation 1 and 4, each cell one `zplan validate` run on 2 MPI
# ranks against a profile calibrated on this machine. Prints a Markdown table (one row per cell,
# then the median and worst errors) and exits nonzero if any cell is above the limits.
#
#   scripts/validate-matrix.sh ZPLAN PROFILE [MODEL] [MICRO_BATCH]
#
# ZPLAN is the zplan binary, PROFILE the calibrated hardware profile (zplan calibrate --out).
# Limits: MAX_TIME_ERROR (default 10) and MAX_MEMORY_ERROR (default 3) percent; STEPS measured
# steps per cell (default 5); SWAP_DIR for the NVMe cells (default /tmp); EXTRA more flags
# for every cell (e.g. EXTRA="--reduce-bucket 2e6").
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 ZPLAN PROFILE [MODEL] [MICRO_BATCH]" >&2
  exit 2
fi
zplan=$1
profile=$2
model=${3:-tiny-mlp}
micro=${4:-32}
steps=${STEPS:-5}
max_time=${MAX_TIME_ERROR:-10}
max_mem=${MAX_MEMORY_ERROR:-3}
swap=${SWAP_DIR:-/tmp}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cells="0:none 1:none 1:cpu 2:none 2:cpu 3:none 3:cpu 3:nvme"
for gas in 1 4; do
  for cell in $cells; do
    stage=${cell%%:*}
    offload=${cell#*:}
    name="$stage-$offload-$gas"
    echo "validate: stage $stage, offload $offload, gas $gas" >&2
    "$zplan" validate --model "$model" --ranks 2 --hw "$profile" --stage "$stage" \
      --offload-optimizer "$offload" --micro-batch "$micro" --gas "$gas" --steps "$steps" \
      --swap-dir "$swap" ${EXTRA:-} --json >"$out/$name.json"
  done
done

python3 - "$out" "$max_time" "$max_mem" <<'EOF'
import json, os, statistics, sys

out, max_time, max_mem = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
order = {"none": 0, "cpu": 1, "nvme": 2}
cells = []
for name in os.listdir(out):
    stage, offload, gas = name[:-len(".json")].split("-")
    cells.append((int(gas), int(stage), order[offload], name))
tiers = [("GPU", "peak GPU (device arena)"), ("pinned host", "peak pinned host"),
         ("NVMe", "peak NVMe")]
print("| stage | offload | gas | step predicted (s) | measured (s) | error | "
      + " | ".join("peak %s predicted (MiB) | error" % t for t, _ in tiers) + " |")
print("|---" * (6 + 2 * len(tiers)) + "|")
time_errs, mem_errs, bad = [], [], 0
for gas, stage, _, name in sorted(cells):
    d = json.load(open(os.path.join(out, name)))
    v = d["validation"]
    offload = name.split("-")[1]
    step = next(x for x in v["time"] if x["name"] == "step time")
    mems = {x["name"]: x for x in v["memory"] if x["checked"]}
    cols = []
    worst = 0.0
    for _, key in tiers:
        x = mems.get(key)
        if x is None:
            cols.append("- | -")
            continue
        cols.append("%.1f | %+.1f%%" % (x["predicted"] / 2**20, x["error_pct"]))
        worst = max(worst, abs(x["error_pct"]))
        mem_errs.append(abs(x["error_pct"]))
    time_errs.append(abs(step["error_pct"]))
    if abs(step["error_pct"]) > max_time or worst > max_mem:
        bad += 1
    print("| %d | %s | %d | %.3f | %.3f | %+.1f%% | %s |" % (
        stage, offload, gas, step["predicted"], step["measured"], step["error_pct"],
        " | ".join(cols)))
print()
print("%d cells. |step time error|: median %.1f%%, worst %.1f%%. |peak memory error| (every "
      "tier of every cell): median %.1f%%, worst %.1f%%." % (
          len(cells), statistics.median(time_errs), max(time_errs), statistics.median(mem_errs),
          max(mem_errs)))
if bad:
    print("%d of %d cells above the limits (time %g%%, memory %g%%)" % (
        bad, len(cells), max_time, max_mem))
    sys.exit(1)
EOF
