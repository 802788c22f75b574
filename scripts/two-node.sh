#!/bin/sh
# Two "nodes" on one machine, so that zplan's inter-node tier is measured and not only a label
# (docs/validation.md "Two nodes on one machine"). Each node is a network namespace with its own
# UTS namespace (its own host name, as a cluster's nodes have); the two are joined by one veth
# link rate-limited with tc tbf in both directions, well below the shared-memory path inside a
# node. One Open MPI job runs across them as across a real cluster: mpirun starts in node 0 and
# reaches node 1 through its rsh launcher, whose "ssh" here is `ip netns exec` (plm_rsh_agent);
# ranks on one node talk through shared memory (btl vader), ranks on different nodes over TCP on
# the link (btl tcp, pml ob1: nothing else may bypass the link). There is no added delay (netem
# does not work on these machines): the TCP path's own latency is the inter-node latency.
# Each node's hostfile line has RANKS_PER_NODE slots, so Open MPI does not see the job as
# oversubscribed and would busy-poll; the nodes share this machine's cores, so ranks yield while
# they wait (mpi_yield_when_idle), as Open MPI does by itself on an oversubscribed node: without
# it a small all_reduce across the nodes took ~60 ms instead of ~0.1-1 ms on a loaded machine.
#
#   scripts/two-node.sh run PROGRAM [ARG...]     one MPI job of 2 x RANKS_PER_NODE ranks
#   scripts/two-node.sh measure ZPLAN OUT_DIR    calibrate across the nodes, then validate
#
# `measure` writes into OUT_DIR: calibrate.txt and profile.json (`zplan calibrate --backend
# host,mpi` across the nodes: an intra-node and an inter-node tier), model.json (the same profile
# without the tables measured across the nodes, so that the simulator prices the multi-node
# collectives with its two-tier alpha-beta model: intra-node steps at the shared-memory tier,
# inter-node steps at the link's), and one `zplan validate --json` per cell and profile
# (validate-CELL-PROFILE.json), then prints a Markdown table of predicted and measured step times
# and memory peaks.
#
# Environment: RATE (tc rate of the link, default 1gbit), RANKS_PER_NODE (default 2), SWEEP
# (calibrate --sweep, default quick), MIN_BYTES and MAX_BYTES (calibrate --min-bytes, default
# 1024: below it a loaded machine's scheduling noise swamps the sizes, and --max-bytes, default
# 4194304),
# MODEL (default tiny-mlp), MICRO_BATCH (default 32), STEPS (default 5), CELLS (validate cells,
# default "3": a list of "STAGE" or "STAGE:EXTRA-FLAGS" with commas for spaces),
# TIMEOUT_S (the whole MPI job's limit, default 900), RT_PRIORITY (run the job under `chrt -f
# RT_PRIORITY`, real-time FIFO scheduling, so that on a machine busy with other work the ranks are
# not descheduled in the middle of a collective: on this project's 2-core machine at load 15, a
# 1 KiB all_reduce across the nodes took 10-30 ms without it and 20-30 us with it; default off).
# `measure` uses it for the calibration only: MPI yields while it waits, but the executor's
# worker threads spin, and two ranks spinning under FIFO on one core starve each other, so
# validate runs under normal scheduling at the highest nice priority instead (nice -n -20), which
# puts its ranks ahead of other work without letting them starve each other.
#
# Needs root, ip, tc, unshare and veth. Where a namespace cannot be made it prints one line,
# "two-node: skipped: REASON", and exits 77 (the automake "skipped" code). Everything it creates
# (namespaces, link, temporary files, processes in the namespaces) is removed on exit, also on
# failure and on SIGINT/SIGTERM.
set -eu

usage() {
  echo "usage: $0 run PROGRAM [ARG...] | $0 measure ZPLAN OUT_DIR" >&2
  exit 2
}
[ $# -ge 2 ] || usage
mode=$1
shift

rt=""
boost=""
rate=${RATE:-1gbit}
ppn=${RANKS_PER_NODE:-2}
ranks=$((2 * ppn))
timeout_s=${TIMEOUT_S:-900}

skip() {
  echo "two-node: skipped: $*"
  exit 77
}

# --- Can this machine make the nodes? -------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
for tool in ip tc unshare mpirun timeout ${RT_PRIORITY:+chrt}; do
  command -v "$tool" >/dev/null 2>&1 || skip "no $tool on PATH"
done
mpirun --version 2>/dev/null | grep -q "Open MPI" ||
  skip "the launch uses Open MPI's rsh agent; mpirun is not Open MPI"

tag="zp2n$$"
ns0="${tag}a"
ns1="${tag}b"
subnet=10.231.0
work=$(mktemp -d)

cleanup() {
  status=$?
  trap - EXIT INT TERM HUP
  for ns in "$ns0" "$ns1"; do
    if ip netns list 2>/dev/null | grep -q "^$ns\b"; then
      # Whatever this script started inside the namespace (mpirun, orted, ranks).
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
      sleep 0.2
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns delete "$ns" 2>/dev/null || true  # takes its end of the veth link with it
    fi
  done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "$ns0" 2>"$work/err" || skip "ip netns add failed: $(head -n1 "$work/err")"
ip netns add "$ns1" 2>"$work/err" || skip "ip netns add failed: $(head -n1 "$work/err")"
# The link is created inside the namespaces, so its names never meet another run's.
ip link add zpl0 netns "$ns0" type veth peer name zpl1 netns "$ns1" 2>"$work/err" ||
  skip "no veth link: $(head -n1 "$work/err")"
ip -n "$ns0" addr add "$subnet.1/24" dev zpl0
ip -n "$ns1" addr add "$subnet.2/24" dev zpl1
for ns in "$ns0" "$ns1"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns0" link set zpl0 up
ip -n "$ns1" link set zpl1 up
# Token bucket in both directions. The burst holds at least one timer tick at the rate (the
# kernel's HZ is at most 1000) and a few maximal TSO segments; the queue holds 50 ms.
for pair in "$ns0:zpl0" "$ns1:zpl1"; do
  ip netns exec "${pair%%:*}" tc qdisc add dev "${pair#*:}" root tbf rate "$rate" burst 512kb \
    latency 50ms 2>"$work/err" || skip "tc tbf on the link failed: $(head -n1 "$work/err")"
done
unshare --uts true 2>"$work/err" || skip "no UTS namespace: $(head -n1 "$work/err")"

# The "ssh" of Open MPI's rsh launcher: `AGENT HOST COMMAND...` runs COMMAND on node HOST, here
# inside its namespaces with its host name.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  $subnet.1) ns=$ns0 name=zplan-node0 ;;
  $subnet.2) ns=$ns1 name=zplan-node1 ;;
  *) echo "two-node agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
chmod +x "$work/agent"
printf '%s slots=%d\n%s slots=%d\n' "$subnet.1" "$ppn" "$subnet.2" "$ppn" >"$work/hosts"

# One MPI job across the nodes: mpirun in node 0 (its namespaces), ranks by node (the first
# RANKS_PER_NODE on node 0), no binding (the cores are shared by both "nodes").
across() {
  ${rt:+chrt -f "$rt"} ${boost:+nice -n -20} ip netns exec "$ns0" \
    unshare --uts sh -c 'hostname zplan-node0 && exec "$@"' sh \
    timeout -s TERM "$timeout_s" mpirun --allow-run-as-root --oversubscribe \
    --hostfile "$work/hosts" -np "$ranks" --map-by slot --bind-to none \
    --mca plm_rsh_agent "$work/agent" --mca mpi_yield_when_idle 1 \
    --mca pml ob1 --mca btl self,vader,tcp \
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" "$@"
}

# In the background, so that a signal to this script runs its trap at once (sh defers traps
# while a foreground command runs).
across_bg() {
  across "$@" &
  wait $!
}

case $mode in
  run)
    rt=${RT_PRIORITY:-}
    across_bg "$@"
    ;;
  measure)
    [ $# -eq 2 ] || usage
    zplan=$(readlink -f "$1")
    out=$2
    mkdir -p "$out"
    out=$(readlink -f "$out")
    echo "two-node: $ranks ranks as 2 nodes of $ppn, link $rate (tc tbf);" \
      "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    rt=${RT_PRIORITY:-}
    across_bg "$zplan" calibrate --backend host,mpi --sweep "${SWEEP:-quick}" \
      --min-bytes "${MIN_BYTES:-1024}" --max-bytes "${MAX_BYTES:-4194304}" \
      --nvme-path "$work" --name two-node \
      --out "$work/profile.json" >"$out/calibrate.txt"
    rt=""
    boost=${RT_PRIORITY:-}
    cp "$work/profile.json" "$out/profile.json"
    # The model profile: the tables measured across the nodes out, the two tiers' scalars in.
    python3 - "$out/profile.json" "$out/model.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["collectives"] = [t for t in p.get("collectives", []) if t.get("nodes", 1) == 1]
p["name"] = p.get("name", "two-node") + "-model"
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
    for cell in ${CELLS:-3}; do
      stage=${cell%%:*}
      extra=""
      [ "$cell" = "$stage" ] || extra=$(echo "${cell#*:}" | tr ',' ' ')
      name=$(echo "$cell" | tr ':,=/.' '-----' | tr -s '-')
      for prof in profile model; do
        echo "two-node: validate stage $stage $extra on $prof.json;" \
          "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        # shellcheck disable=SC2086
        across_bg "$zplan" validate --model "${MODEL:-tiny-mlp}" --ranks "$ranks" --nodes 2 \
          --hw "$out/$prof.json" --stage "$stage" --micro-batch "${MICRO_BATCH:-32}" \
          --steps "${STEPS:-5}" $extra --json >"$out/validate-$name-$prof.json"
      done
    done
    python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
p = json.load(open(os.path.join(out, "profile.json")))
n, net = p["node"], p["network"]
print("intra-node (shm): busbw %.2f GB/s, latency %.2f us per step; inter-node (link): "
      "%.3f GB/s, latency %.2f us per step" % (
          n["intra_busbw_gbps"], n["intra_latency_us"], net["nic_gbps"], net["latency_us"]))
print()
print("| cell | profile | step predicted (s) | measured (s) | error | peak memory predicted (MiB) "
      "| error |")
print("|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(out, "validate-*.json"))):
    cell, prof = os.path.basename(f)[len("validate-"):-len(".json")].rsplit("-", 1)
    v = json.load(open(f))["validation"]
    step = next(x for x in v["time"] if x["name"] == "step time")
    mem = next(x for x in v["memory"] if x["checked"])
    print("| %s | %s | %.4f | %.4f | %+.1f%% | %.1f | %+.1f%% |" % (
        cell, prof, step["predicted"], step["measured"], step["error_pct"],
        mem["predicted"] / 2**20, mem["error_pct"]))
EOF
    ;;
  *)
    usage
    ;;
esac
