#!/usr/bin/env bash
# Rerun the public fidelity set (tests/fidelity/cases.json, docs/fidelity.md): simulate every
# published DeepSpeed measurement with zplan and print predicted vs measured, the % errors, their
# median and worst, and the fits/OOM verdicts.
#
#   scripts/fidelity.sh [--zplan PATH] [--cases FILE] [--markdown] [--only SUBSTRING]
#   scripts/fidelity.sh --catalogue [--cases FILE]
#
# --zplan     the zplan binary (default: $ZPLAN, else build/default/zplan of this checkout)
# --cases     the case file (default: tests/fidelity/cases.json)
# --markdown  print the tables as Markdown (what docs/fidelity.md shows)
# --only      run only the cases whose id contains SUBSTRING
# --catalogue print the sources, cases (what each source states, the configuration, the
#             assumptions) and the rejected measurements as Markdown, from the case file alone
#
# Errors are (predicted - measured) / measured. Throughput figures are compared as throughput:
# a step time is turned into its reciprocal first, so a positive error always means zplan
# predicts the run faster than it was; a TFLOP/s figure is zplan's samples/s times the source's
# own FLOPs per sample (the case's flops_per_sample) over the GPU count. Memory is compared with
# the part of zplan's peak the source measured: max_memory_allocated = the bytes at the peak
# without the runtime category; max_memory_reserved = those bytes plus the allocator's
# fragmentation (everything in the caching allocator); nvidia-smi or an unstated metric = the
# whole peak (CUDA context and NCCL buffers included). A case that does not run (zplan exits with
# an error) is reported and makes the script exit 1; a wrong verdict or a large error does not:
# this is a report, the numbers are the result.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zplan="${ZPLAN:-$here/build/default/zplan}"
cases="$here/tests/fidelity/cases.json"
markdown=0
only=""
catalogue=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --zplan) zplan="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --markdown) markdown=1; shift ;;
    --only) only="$2"; shift 2 ;;
    --catalogue) catalogue=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fidelity.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $catalogue == 1 || -x "$zplan" ]] || { echo "fidelity.sh: no zplan binary at '$zplan' (build it, or pass --zplan / set ZPLAN)" >&2; exit 2; }
[[ -f "$cases" ]] || { echo "fidelity.sh: no case file at '$cases'" >&2; exit 2; }

exec python3 - "$zplan" "$cases" "$here" "$markdown" "$only" "$catalogue" <<'PY'
import json, os, statistics, subprocess, sys, tempfile

zplan, cases_path, root, markdown, only = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
doc = json.load(open(cases_path))

if sys.argv[6] == "1":
    out = []
    for key, s in doc["sources"].items():
        out.append("### `%s`: %s" % (key, s["title"]))
        out.append("")
        out.append("- Address: <%s> (%s)" % (s["url"], s["kind"]))
        for f, label in (("hardware", "Hardware"), ("deepspeed_version", "DeepSpeed version"),
                         ("read_via", "Read via"), ("caveat", "Caveat"), ("note", "Note")):
            if f in s:
                out.append("- %s: %s" % (label, s[f]))
        common = None
        for c in doc["cases"]:
            if c["source"] == key:
                common = set(c["assumptions"]) if common is None else common & set(c["assumptions"])
        common = common or set()
        if common:
            out.append("- Assumed for every case of this source:")
            for a in next(c for c in doc["cases"] if c["source"] == key)["assumptions"]:
                if a in common:
                    out.append("  - " + a)
        out.append("")
        out.append("| case | where | what the source states | run as | compared | other assumptions |")
        out.append("|---|---|---|---|---|---|")
        for c in doc["cases"]:
            if c["source"] != key:
                continue
            z = c["ds_config"]["zero_optimization"]
            off = [k.split("_")[1] + " " + z[k]["device"] for k in ("offload_optimizer", "offload_param")
                   if z.get(k, {}).get("device", "none") != "none"]
            zpp = ["%s %s" % (k, json.dumps(z[k])) for k in ("zero_hpz_partition_size", "zero_quantized_weights",
                    "zero_quantized_gradients", "mics_shard_size", "mics_hierarchical_params_gather") if k in z]
            run = "%s on %d x %s%s (%d node%s), ZeRO-%d%s, seq %d, micro-batch %d x GAS %d = %d, %s, checkpointing %s, %s" % (
                c["model"].split("/")[-1], c["gpus"], c["hw"],
                "" if not c.get("hw_overrides") else " (profile overrides: " + ", ".join("%s = %s" % kv for kv in c["hw_overrides"].items()) + ")",
                c["nodes"], "s" if c["nodes"] > 1 else "", z["stage"], ((", offload " + ", ".join(off)) if off else "") + "".join(", " + x for x in zpp),
                c["seq_len"], c["micro_batch"], c["gas"], c["global_batch"], c["precision"], c["checkpointing"],
                "flash attention" if c["flash_attention"] else "no fused attention")
            comp = "; ".join(
                "%s %s %s%s" % (m["kind"] + ("/" + m["metric"] if "metric" in m else ""), m["value"], m["unit"],
                                " (unit assumed)" if m.get("unit_assumed") else "") for m in c["measured"])
            comp = (comp + "; " if comp else "") + "verdict " + c["verdict"]
            other = "; ".join(a for a in c["assumptions"] if a not in common) or "-"
            cell = lambda t: str(t).replace("|", "/").replace("\n", " ")
            out.append("| %s | %s | %s | %s | %s | %s |" % tuple(map(cell, (c["id"], c["where"], c["states"], run, comp, other))))
        out.append("")
    if doc.get("rejected"):
        out.append("## Rejected")
        out.append("")
        out.append("Measurements found while building the set and left out, with the reason.")
        out.append("")
        out.append("| source | what it states | why it is not in the set |")
        out.append("|---|---|---|")
        for r in doc["rejected"]:
            out.append("| %s | %s | %s |" % (r["source"], r["what"], r["why"]))
    print("\n".join(out))
    sys.exit(0)
GiB = 2.0 ** 30
THROUGHPUT = ("samples_per_s", "step_time_s", "tflops_per_gpu")


def set_pointer(obj, pointer, value):
    keys = pointer.lstrip("/").split("/")
    for k in keys[:-1]:
        obj = obj[k]
    obj[keys[-1]] = value


def profile_json(name):
    path = os.path.join(root, "hardware", name + ".json")
    with open(path) as f:
        return json.load(f)


def run_case(c, tmp):
    ds = os.path.join(tmp, c["id"] + ".ds_config.json")
    with open(ds, "w") as f:
        json.dump(c["ds_config"], f)
    hw = c["hw"]
    prof = profile_json(c["hw"])
    if c.get("hw_overrides"):
        for ptr, val in c["hw_overrides"].items():
            set_pointer(prof, ptr, val)
        prof["name"] = c["hw"] + "-" + c["id"]
        hw = os.path.join(tmp, c["id"] + ".hw.json")
        with open(hw, "w") as f:
            json.dump(prof, f)
    model = c["model"]
    if model.endswith(".json"):
        model = os.path.join(root, model)
    cmd = [zplan, "simulate", "--model", model, "--hw", hw, "--gpus", str(c["gpus"]),
           "--nodes", str(c["nodes"]), "--seq-len", str(c["seq_len"]), "--ds-config", ds,
           "--checkpointing", c["checkpointing"], "--json"]
    if not c["flash_attention"]:
        cmd.append("--no-flash-attention")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        return None, prof, (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["exit %d" % p.returncode]
    return json.loads(p.stdout)["result"], prof, None


def predict(m, c, r, prof):
    """zplan's value for measurement m of case c, in m's kind."""
    k = m["kind"]
    if k == "samples_per_s":
        return r["samples_per_s"]
    if k == "step_time_s":
        return r["step_time_s"]
    if k == "tflops_per_gpu":
        return m["flops_per_sample"] * r["samples_per_s"] / c["gpus"] / 1e12
    if k == "peak_memory":
        gpu = r["memory"]["gpu"]
        peak = gpu["peak_bytes"]
        runtime = gpu["at_peak"].get("runtime", 0)
        frag = prof["runtime"]["allocator_fragmentation"]
        allocated = peak - runtime                      # everything but the runtime category
        reserved = allocated * (1 + frag)               # plus the caching allocator's slack
        metric = m["metric"]
        if metric == "max_memory_allocated":
            return allocated / GiB
        if metric == "max_memory_reserved":
            return reserved / GiB
        return peak / GiB                               # nvidia-smi, or unstated
    raise SystemExit("fidelity.sh: case %s: unknown measurement kind %r" % (c["id"], k))


def error(m, pred):
    if m["kind"] == "step_time_s":                      # compare as throughput
        return m["value"] / pred - 1.0
    return pred / m["value"] - 1.0


rows, failures = [], []
with tempfile.TemporaryDirectory() as tmp:
    for c in doc["cases"]:
        if only and only not in c["id"]:
            continue
        r, prof, err = run_case(c, tmp)
        if r is None:
            failures.append((c["id"], err[0]))
            continue
        offl = [x for x in ("offload_optimizer", "offload_param")
                if c["ds_config"]["zero_optimization"].get(x, {}).get("device", "none") not in ("none", None)]
        cfg = "z%d%s" % (c["ds_config"]["zero_optimization"]["stage"],
                         "+" + "+".join("opt" if x == "offload_optimizer" else "par" for x in offl) + "-cpu" if offl else "")
        base = dict(id=c["id"], source=c["source"], ds=c.get("deepspeed_version", "?"), hw=c["hw"], gpus=c["gpus"], cfg=cfg, seq=c["seq_len"],
                    mb=c["micro_batch"], verdict=c["verdict"], pred_fits=r["fits"],
                    bottleneck=r.get("bottleneck", ""), bound=r.get("bound", ""))
        if not c["measured"]:
            rows.append(dict(base, kind="verdict", measured=None, predicted=None, err=None))
        z = c["ds_config"]["zero_optimization"]
        if z.get("mics_shard_size", -1) > 0:
            cfg += "+mics%d" % z["mics_shard_size"]
        zpp = [n for k, n in (("zero_hpz_partition_size", "hpz"), ("zero_quantized_weights", "qwz"),
                              ("zero_quantized_gradients", "qgz"))
               if z.get(k) is True or (type(z.get(k)) is int and z.get(k) > 1)]
        if zpp:
            cfg += "+" + "+".join(zpp)
        base["cfg"] = cfg
        for m in c["measured"]:
            if m["kind"] == "speedup":
                # A published ratio: this config's throughput over the same run with the
                # baseline ds_config (plain ZeRO-3), both simulated.
                rb, _, errb = run_case(dict(c, id=c["id"] + "-baseline", ds_config=m["baseline_ds_config"]), tmp)
                if rb is None:
                    failures.append((c["id"] + " (baseline)", errb[0]))
                    continue
                p = r["samples_per_s"] / rb["samples_per_s"]
                rows.append(dict(base, kind="speedup", measured=m["value"], predicted=p, err=p / m["value"] - 1.0))
                continue
            p = predict(m, c, r, prof)
            rows.append(dict(base, kind=m["kind"] + ("(" + m["metric"] + ")" if m["kind"] == "peak_memory" else ""),
                             measured=m["value"], predicted=p, err=error(m, p)))


def fmt(x):
    if x is None:
        return "-"
    return "%.4g" % x if abs(x) < 1000 else "%.0f" % x


def pct(e):
    return "-" if e is None else "%+.0f%%" % (100 * e)


def summary(label, errs):
    if not errs:
        return "%s: no figures" % label
    a = sorted(errs, key=lambda t: abs(t[1]))
    med = statistics.median(abs(e) for _, e in errs)
    worst = a[-1]
    over = sum(1 for _, e in errs if e > 0)
    return ("%s: %d figures, median |error| %.0f%%, worst %+.0f%% (%s), zplan higher in %d of %d"
            % (label, len(errs), 100 * med, 100 * worst[1], worst[0], over, len(errs)))


thr = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"] in THROUGHPUT]
mem = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"].startswith("peak_memory")]
ratios = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"] == "speedup"]
verdicts = {}
for r in rows:
    verdicts[r["id"]] = (r["verdict"], "fits" if r["pred_fits"] else "oom")
wrong = [(i, v) for i, v in verdicts.items() if v[0] != v[1]]
sources = sorted({r["source"] for r in rows})

hdr = ["case", "DeepSpeed", "hw", "GPUs", "ZeRO", "seq", "mb", "figure", "measured", "zplan", "error", "verdict (meas/zplan)"]
out = []
if markdown:
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    for r in rows:
        v = "%s / %s%s" % (r["verdict"], "fits" if r["pred_fits"] else "oom", "" if r["verdict"] == ("fits" if r["pred_fits"] else "oom") else " **wrong**")
        out.append("| %s | %s | %s | %d | %s | %d | %d | %s | %s | %s | %s | %s |"
                   % (r["id"], r["ds"], r["hw"], r["gpus"], r["cfg"], r["seq"], r["mb"], r["kind"], fmt(r["measured"]),
                      fmt(r["predicted"]), pct(r["err"]), v))
    out.append("")
    out.append("- " + summary("Throughput", thr))
    out.append("- " + summary("Memory", mem))
    out.append("- " + summary("Speed-up ratios (ZeRO++ / MiCS over ZeRO-3)", ratios))
    out.append("- Verdicts: %d of %d right%s" % (len(verdicts) - len(wrong), len(verdicts),
               "; wrong: " + ", ".join("%s (measured %s, zplan %s)" % (i, v[0], v[1]) for i, v in wrong) if wrong else ""))
    out.append("- %d cases, %d figures, %d sources" % (len(verdicts), len(thr) + len(mem), len(sources)))
    out.append("")
    out.append("Per source (median |error|):")
    out.append("")
    out.append("| source | throughput figures | median throughput error | memory figures | median memory error |")
    out.append("|---|---|---|---|---|")
    for s in sources:
        t = [abs(r["err"]) for r in rows if r["source"] == s and r["err"] is not None and r["kind"] in THROUGHPUT]
        m = [abs(r["err"]) for r in rows if r["source"] == s and r["err"] is not None and r["kind"].startswith("peak_memory")]
        out.append("| %s | %d | %s | %d | %s |" % (s, len(t), "%.0f%%" % (100 * statistics.median(t)) if t else "-",
                                                   len(m), "%.0f%%" % (100 * statistics.median(m)) if m else "-"))
    out.append("")
    out.append("What zplan says limits each case (its `bottleneck` and `bound`):")
    out.append("")
    out.append("| case | zplan's bottleneck | bound by |")
    out.append("|---|---|---|")
    seen = set()
    for r in rows:
        if r["id"] not in seen:
            seen.add(r["id"])
            out.append("| %s | %s | %s |" % (r["id"], r["bottleneck"], r["bound"]))
else:
    w = [max(len(h), 8) for h in hdr]
    w[0] = max(len(r["id"]) for r in rows) if rows else 4
    w[1] = max([len(r["ds"]) for r in rows] + [9])
    w[4] = max([len(r["cfg"]) for r in rows] + [4])
    w[7] = max([len(r["kind"]) for r in rows] + [6])
    line = lambda cells: "  ".join(str(x).ljust(w[i]) for i, x in enumerate(cells))
    out.append(line(hdr))
    for r in rows:
        v = "%s/%s%s" % (r["verdict"], "fits" if r["pred_fits"] else "oom", "" if r["verdict"] == ("fits" if r["pred_fits"] else "oom") else "  WRONG")
        out.append(line([r["id"], r["ds"], r["hw"], r["gpus"], r["cfg"], r["seq"], r["mb"], r["kind"], fmt(r["measured"]),
                         fmt(r["predicted"]), pct(r["err"]), v]))
    out.append("")
    out.append(summary("Throughput", thr))
    out.append(summary("Memory", mem))
    out.append(summary("Speed-up ratios (ZeRO++ / MiCS over ZeRO-3)", ratios))
    out.append("Verdicts: %d of %d right" % (len(verdicts) - len(wrong), len(verdicts)))
    for i, v in wrong:
        out.append("  wrong: %s (measured %s, zplan %s)" % (i, v[0], v[1]))
    out.append("%d cases, %d figures, %d sources" % (len(verdicts), len(thr) + len(mem), len(sources)))
for f in failures:
    out.append("FAILED to simulate %s: %s" % f)
print("\n".join(out))
sys.exit(1 if failures else 0)
PY
