#!/usr/bin/env bash
# Rerun the public fidelity set (tests/fidelity/cases.json, docs/fidelity.md): simulate every
# published DeepSpeed measurement with zplan and print predicted vs measured, the % errors, their
# median and worst, and the fits/OOM verdicts.
#
#   scripts/fidelity.sh [--zplan PATH] [--cases FILE] [--markdown] [--only SUBSTRING] [--set PTR=V]...
#   scripts/fidelity.sh --fit [--fit-spec FILE] [--jobs N] [--zplan PATH] [--markdown]
#   scripts/fidelity.sh --catalogue [--cases FILE]
#
# --zplan     the zplan binary (default: $ZPLAN, else build/default/zplan of this checkout)
# --cases     the case file (default: tests/fidelity/cases.json; the format, and what a set of
#             your own needs: docs/formats.md, "Fidelity case file"). It is checked first: a
#             missing or wrong field stops the run with one line naming the case and the field
# --markdown  print the tables as Markdown (what docs/fidelity.md shows)
# --only      run only the cases whose id contains SUBSTRING
# --catalogue print the sources, cases (what each source states, the configuration, the
#             assumptions) and the rejected measurements as Markdown, from the case file alone
# --set       PTR=VALUE: set the profile field at JSON pointer PTR (e.g. /framework/host_op_us)
#             to the JSON VALUE in every case's profile, after the case's own hw_overrides
# --fit       fit the constants that no source gives (tests/fidelity/fit.json: each a profile
#             JSON pointer with its bounds) once over the whole set, then leave each source out
#             in turn: fit on the others, predict it; prints the constants and both sets of errors.
#             A source marked "fitted": false in the case file (a DeepSpeed whose mechanism
#             differs from the 0.19 zplan models; "not_fitted_why" says how) is reported at the
#             fitted constants and never fitted to. A constant the search moved goes back to
#             the value fit.json ships when that costs the objective less than 1e-4
# --fit-spec  the fit specification (default: tests/fidelity/fit.json)
# --jobs      cases simulated at once (default 2)
#
# A case runs with the transformers release of its "transformers" field, else of its date
# (transformers_of below; it decides how a mixture of experts is built, docs/formats.md).
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
fit=0
fitspec="$here/tests/fidelity/fit.json"
jobs=2
sets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --zplan) zplan="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --markdown) markdown=1; shift ;;
    --only) only="$2"; shift 2 ;;
    --catalogue) catalogue=1; shift ;;
    --set) sets+=("$2"); shift 2 ;;
    --fit) fit=1; shift ;;
    --fit-spec) fitspec="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fidelity.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $catalogue == 1 || -x "$zplan" ]] || { echo "fidelity.sh: no zplan binary at '$zplan' (build it, or pass --zplan / set ZPLAN)" >&2; exit 2; }
[[ -f "$cases" ]] || { echo "fidelity.sh: no case file at '$cases'" >&2; exit 2; }

exec python3 - "$zplan" "$cases" "$here" "$markdown" "$only" "$catalogue" "$fit" "$fitspec" "$jobs" ${sets[@]+"${sets[@]}"} <<'PY'
import concurrent.futures, json, math, os, re, statistics, subprocess, sys, tempfile

zplan, cases_path, root, markdown, only = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
fit_mode, fitspec_path, jobs = sys.argv[7] == "1", sys.argv[8], int(sys.argv[9])
global_sets = {}
for kv in sys.argv[10:]:
    if "=" not in kv:
        raise SystemExit("fidelity.sh: --set wants PTR=VALUE, got %r" % kv)
    ptr, val = kv.split("=", 1)
    try:
        global_sets[ptr] = json.loads(val)
    except ValueError:
        raise SystemExit("fidelity.sh: --set %s: %r is not a JSON value" % (ptr, val))
cases_dir = os.path.dirname(os.path.abspath(cases_path))
try:
    with open(cases_path) as f:
        doc = json.load(f)
except ValueError as e:
    raise SystemExit("fidelity.sh: %s: not JSON: %s" % (cases_path, e))
except OSError as e:
    raise SystemExit("fidelity.sh: %s: %s" % (cases_path, e.strerror))


def bad(where, msg):
    raise SystemExit("fidelity.sh: %s: %s: %s" % (cases_path, where, msg))


def resolve(path):
    """A file a case names: as given if absolute, else next to the case file, else in this checkout."""
    if os.path.isabs(path):
        return path
    near = os.path.join(cases_dir, path)
    return near if os.path.exists(near) else os.path.join(root, path)


# The measurement kinds a case may give (docs/formats.md, "Fidelity case file").
THROUGHPUT = ("samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu", "step_time_s", "tflops_per_gpu")
KINDS = THROUGHPUT + ("peak_memory", "speedup")
MEMORY_METRICS = ("max_memory_allocated", "max_memory_reserved", "nvidia-smi", "unstated")


def number(where, obj, key, integer=False):
    """obj[key], which must be a positive number (an integer if `integer`)."""
    if key not in obj:
        bad(where, "'%s' is missing" % key)
    v = obj[key]
    ok = type(v) is int if integer else type(v) in (int, float)
    if not ok or not v > 0:
        bad(where, "'%s' must be a positive %s, got %s" % (key, "integer" if integer else "number", json.dumps(v)))
    return v


def profile_json(c):
    """The case's profile as JSON (check_case sets its file)."""
    with open(c["profile_file"]) as f:
        return json.load(f)


def check_case(c, i):
    """Checks case c (the i-th) and fills the fields it may leave out; one line names what is wrong."""
    if type(c) is not dict:
        bad("/cases/%d" % i, "a case must be an object")
    if type(c.get("id")) is not str or not c["id"]:
        bad("/cases/%d" % i, "'id' (a non-empty string) is missing")
    where = "case '%s'" % c["id"]
    for key in ("source", "model", "hw"):
        if type(c.get(key)) is not str or not c[key]:
            bad(where, "'%s' (a string) is missing" % key)
    stock = os.path.join(root, "hardware", os.path.basename(c["hw"]))
    if c["hw"].endswith(".json") and not os.path.isfile(resolve(c["hw"])) and os.path.isfile(stock):
        c["hw"] = c["hw"][:-len(".json")]               # a stock name written as zplan takes it
    # The profile's file: the case's own (passed to zplan by its path) or a stock one (by name).
    if c["hw"].endswith(".json"):
        c["hw_path"] = c["profile_file"] = resolve(c["hw"])
        if not os.path.isfile(c["hw_path"]):
            bad(where, "hw: no profile file '%s'" % c["hw"])
    else:
        c["profile_file"] = os.path.join(root, "hardware", c["hw"] + ".json")
        if not os.path.isfile(c["profile_file"]):
            bad(where, "hw: '%s' is not a stock profile (hardware/*.json) and not a .json file" % c["hw"])
    if c["model"].endswith(".json"):
        c["model_path"] = resolve(c["model"])
        if not os.path.isfile(c["model_path"]):
            bad(where, "model: no file '%s'" % c["model"])
    number(where, c, "gpus", integer=True)
    number(where, c, "seq_len", integer=True)
    if type(c.get("hw_overrides", {})) is not dict or any(not k.startswith("/") for k in c.get("hw_overrides", {})):
        bad(where, "hw_overrides must be an object from a JSON pointer (\"/node/cpu_cores\") to a value")
    if "nodes" in c:
        number(where, c, "nodes", integer=True)
    else:                                               # as few as the profile's nodes hold
        try:
            per_node = profile_json(c)["node"]["gpus_per_node"]
        except (ValueError, KeyError, TypeError):
            bad(where, "hw: '%s' is not a profile with node.gpus_per_node" % c["hw"])
        c["nodes"] = -(-c["gpus"] // per_node)
    ds = c.get("ds_config")
    if type(ds) is not dict:
        bad(where, "'ds_config' (the DeepSpeed config the run used, an object) is missing")
    z = ds.get("zero_optimization", {})
    if type(z) is not dict:
        bad(where, "ds_config/zero_optimization must be an object")
    # Shown in the tables; taken from the ds_config where the case does not repeat them.
    c.setdefault("micro_batch", ds.get("train_micro_batch_size_per_gpu", 1))
    c.setdefault("gas", ds.get("gradient_accumulation_steps", 1))
    c.setdefault("global_batch", ds.get("train_batch_size", "-"))
    c.setdefault("precision", "bf16" if ds.get("bf16", {}).get("enabled") else
                 "fp16" if ds.get("fp16", {}).get("enabled") else "unstated")
    c.setdefault("where", "-")
    c.setdefault("states", "-")
    c.setdefault("assumptions", [])
    if c.get("checkpointing", "none") not in ("none", "full", "cpu"):
        bad(where, "checkpointing must be none, full or cpu, got %s" % json.dumps(c["checkpointing"]))
    if "flash_attention" in c and type(c["flash_attention"]) is not bool:
        bad(where, "flash_attention must be true or false")
    if "transformers" in c and c["transformers"] not in ("4", "5"):
        bad(where, "transformers must be \"4\" or \"5\" (the release line the run used)")
    if "lora" in c:
        lo = c["lora"]
        if (type(lo) is not dict or type(lo.get("rank")) is not int or lo["rank"] < 1
                or type(lo.get("targets")) is not str or not lo["targets"]
                or type(lo.get("dropout", 0)) not in (int, float) or not 0 <= lo.get("dropout", 0) < 1):
            bad(where, "lora must be {\"rank\": r, \"targets\": \"q_proj,v_proj\", \"dropout\": p} (PEFT's r, target_modules and lora_dropout; dropout optional, 0)")
    if c.get("verdict") not in ("fits", "oom"):
        bad(where, "'verdict' must be \"fits\" or \"oom\" (what the run did)")
    if type(c.get("measured", [])) is not list:
        bad(where, "'measured' must be a list")
    c.setdefault("measured", [])
    for j, m in enumerate(c["measured"]):
        w = "%s, measured[%d]" % (where, j)
        if type(m) is not dict or m.get("kind") not in KINDS:
            bad(w, "'kind' must be one of %s" % ", ".join(KINDS))
        number(w, m, "value")
        m.setdefault("unit", "")
        if m["kind"] == "tflops_per_gpu":
            if "flops_per_sample" not in m:
                bad(w, "a tflops_per_gpu figure needs 'flops_per_sample', the source's own FLOPs per sample")
            number(w, m, "flops_per_sample")
        if m["kind"] == "peak_memory" and m.setdefault("metric", "unstated") not in MEMORY_METRICS:
            bad(w, "metric must be one of %s" % ", ".join(MEMORY_METRICS))
        if m["kind"] == "speedup" and type(m.get("baseline_ds_config")) is not dict:
            bad(w, "a speedup needs 'baseline_ds_config', the ds_config it is a ratio over")


if type(doc) is not dict or type(doc.get("cases")) is not list:
    bad("/", "the case file is an object with a 'cases' list")
if type(doc.setdefault("sources", {})) is not dict or any(type(v) is not dict for v in doc["sources"].values()):
    bad("/sources", "must be an object from a source key to an object describing it")
if type(doc.setdefault("rejected", [])) is not list or any(
        type(r) is not dict or not all(k in r for k in ("source", "what", "why")) for r in doc["rejected"]):
    bad("/rejected", "must be a list of {source, what, why} objects")
seen_ids = set()
for i, c in enumerate(doc["cases"]):
    check_case(c, i)
    if c["id"] in seen_ids:
        bad("case '%s'" % c["id"], "the id is used twice")
    seen_ids.add(c["id"])


def is_fitted(source):
    """Whether the fit may read `source`: true unless cases.json marks it "fitted": false."""
    return doc["sources"].get(source, {}).get("fitted", True) is not False


if sys.argv[6] == "1":
    out = []
    # The sources the file describes, then any a case names without describing.
    listed = dict(doc["sources"])
    for c in doc["cases"]:
        listed.setdefault(c["source"], {})
    for key, s in listed.items():
        out.append("### `%s`: %s" % (key, s.get("title", "(not described in the case file)")))
        out.append("")
        if "url" in s:
            out.append("- Address: <%s> (%s)" % (s["url"], s.get("kind", "-")))
        for f, label in (("hardware", "Hardware"), ("deepspeed_version", "DeepSpeed version"),
                         ("read_via", "Read via"), ("caveat", "Caveat"), ("note", "Note")):
            if f in s:
                out.append("- %s: %s" % (label, s[f]))
        if not is_fitted(key):
            out.append("- Not fitted to: %s" % s.get("not_fitted_why", "-"))
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
            z = c["ds_config"].get("zero_optimization", {})
            off = [k.split("_")[1] + " " + z[k]["device"] for k in ("offload_optimizer", "offload_param")
                   if z.get(k, {}).get("device", "none") != "none"]
            zpp = ["%s %s" % (k, json.dumps(z[k])) for k in ("zero_hpz_partition_size", "zero_quantized_weights",
                    "zero_quantized_gradients", "mics_shard_size", "mics_hierarchical_params_gather") if k in z]
            run = "%s on %d x %s%s (%d node%s), ZeRO-%d%s, seq %d, micro-batch %s x GAS %s = %s, %s, checkpointing %s, %s" % (
                c["model"].split("/")[-1], c["gpus"], c["hw"],
                "" if not c.get("hw_overrides") else " (profile overrides: " + ", ".join("%s = %s" % kv for kv in c["hw_overrides"].items()) + ")",
                c["nodes"], "s" if c["nodes"] > 1 else "", z.get("stage", 0), ((", offload " + ", ".join(off)) if off else "") + "".join(", " + x for x in zpp),
                c["seq_len"], c["micro_batch"], c["gas"], c["global_batch"], c["precision"], c.get("checkpointing", "as the ds_config says"),
                c.get("attention", {False: "no fused attention", True: "flash attention"}.get(c.get("flash_attention"), "sdpa (zplan's default)"))
                + (", %s loss" % c["loss"] if "loss" in c else "")
                + (", model built outside zero.Init" if c.get("zero_init") is False else "")
                + (", the script's AdamW on torch's %s update" % c["client_optimizer"] if "client_optimizer" in c else "")
                + (", transformers %s" % c["transformers"] if "transformers" in c else "")
                + (", LoRA r %d on %s, dropout %g" % (c["lora"]["rank"], c["lora"]["targets"], c["lora"].get("dropout", 0)) if "lora" in c else ""))
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



def set_pointer(obj, pointer, value):
    keys = pointer.lstrip("/").split("/")
    for k in keys[:-1]:
        obj = obj.setdefault(k, {})
    obj[keys[-1]] = value


def transformers_of(c):
    """The transformers release line a case ran: its "transformers" field; else the release its
    DeepSpeed version text names ("transformers 5.14.1"); else "4" where that text puts the run
    before transformers 5 (v5.0.0rc0, 2025-12-01): a DeepSpeed version it starts with older than
    0.18, or a stated year before 2025 or a month of 2025 before December. None: zplan's default
    (5)."""
    if "transformers" in c:
        return c["transformers"]
    texts = [c.get("deepspeed_version", ""),
             doc["sources"].get(c["source"], {}).get("deepspeed_version", "")]
    for text in texts:
        named = re.search(r"transformers (\d+)\.", text)
        if named and named.group(1) in ("4", "5"):
            return named.group(1)
    for text in texts:
        ds = re.match(r"\s*~?(\d+)\.(\d+)", text)
        if ds and (int(ds.group(1)), int(ds.group(2))) < (0, 18):
            return "4"
        for month, year in re.findall(r"(?:(January|February|March|April|May|June|July|August|"
                                      r"September|October|November|December) )?\b(20\d\d)\b", text):
            if int(year) < 2025 or (int(year) == 2025 and month not in ("", "December")):
                return "4"
    return None


def run_case(c, tmp, sets=None):
    sets = global_sets if sets is None else sets
    tag = c["id"] + "-" + str(abs(hash(json.dumps(sets, sort_keys=True))))
    ds = os.path.join(tmp, tag + ".ds_config.json")
    with open(ds, "w") as f:
        json.dump(c["ds_config"], f)
    hw = c.get("hw_path", c["hw"])
    prof = profile_json(c)
    if c.get("hw_overrides") or sets:
        for ptr, val in list(c.get("hw_overrides", {}).items()) + list(sets.items()):
            set_pointer(prof, ptr, val)
        prof["name"] = os.path.basename(c["hw"]).rsplit(".json", 1)[0] + "-" + c["id"]
        hw = os.path.join(tmp, tag + ".hw.json")
        with open(hw, "w") as f:
            json.dump(prof, f)
    model = c.get("model_path", c["model"])
    cmd = [zplan, "simulate", "--model", model, "--hw", hw, "--gpus", str(c["gpus"]),
           "--nodes", str(c["nodes"]), "--seq-len", str(c["seq_len"]), "--ds-config", ds, "--json"]
    # "checkpointing" (optional): without it, the ds_config's activation_checkpointing decides.
    if "checkpointing" in c:
        cmd += ["--checkpointing", c["checkpointing"]]
    # "attention" (optional): the model's attn_implementation where the source names it;
    # without it, flash_attention false = eager and true or absent = zplan's default (sdpa).
    if "attention" in c:
        cmd += ["--attention", c["attention"]]
    elif c.get("flash_attention") is False:
        cmd.append("--no-flash-attention")
    # "loss" (optional): "fused" where the source uses a fused linear + cross-entropy (Liger).
    if "loss" in c:
        cmd += ["--loss", c["loss"]]
    # "zero_init" (optional): false where the source builds the model outside deepspeed.zero.Init
    # and hands it to deepspeed.initialize (ZeRO-3 then moves it whole to the GPU first).
    if c.get("zero_init") is False:
        cmd.append("--no-zero-init")
    # "client_optimizer" (optional): "foreach" where the script passes its own torch.optim.AdamW
    # without fused=True (no optimizer block): torch's foreach update, a pass per operation.
    if "client_optimizer" in c:
        cmd += ["--client-optimizer", c["client_optimizer"]]
    # "transformers" (optional): "4" where the run's transformers built a mixture of experts
    # as 4.x does (a module per expert Linear); without it, the release of the run's date
    # (transformers_of), else zplan's default (5). It changes nothing for a dense model.
    t = transformers_of(c)
    if t is not None:
        cmd += ["--transformers", t]
    # "lora" (optional): PEFT LoRA of that rank on those target_modules, every base weight
    # frozen (the training script's choice; the ds_config has no key for it).
    if "lora" in c:
        cmd += ["--lora-rank", str(c["lora"]["rank"]), "--lora-targets", c["lora"]["targets"],
                "--lora-dropout", repr(float(c["lora"].get("dropout", 0)))]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        return None, prof, (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["exit %d" % p.returncode]
    return json.loads(p.stdout)["result"], prof, None


def predict(m, c, r, prof):
    """zplan's value for measurement m of case c, in m's kind."""
    k = m["kind"]
    if k == "samples_per_s":
        return r["samples_per_s"]
    if k == "tokens_per_s":
        return r["tokens_per_s"]
    if k == "tokens_per_s_per_gpu":
        return r["tokens_per_s"] / c["gpus"]
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


def case_rows(c, r, prof, tmp, sets, failures):
    """The table rows of case c from zplan's result r (a speed-up ratio simulates its baseline)."""
    z = c["ds_config"].get("zero_optimization", {})
    offl = [x for x in ("offload_optimizer", "offload_param")
            if z.get(x, {}).get("device", "none") not in ("none", None)]
    cfg = "z%d%s" % (z.get("stage", 0),
                     "+" + "+".join("opt" if x == "offload_optimizer" else "par" for x in offl) + "-cpu" if offl else "")
    if z.get("mics_shard_size", -1) > 0:
        cfg += "+mics%d" % z["mics_shard_size"]
    zpp = [n for k, n in (("zero_hpz_partition_size", "hpz"), ("zero_quantized_weights", "qwz"),
                          ("zero_quantized_gradients", "qgz"))
           if z.get(k) is True or (type(z.get(k)) is int and z.get(k) > 1)]
    if zpp:
        cfg += "+" + "+".join(zpp)
    base = dict(id=c["id"], source=c["source"], ds=c.get("deepspeed_version", "?"), hw=c["hw"], gpus=c["gpus"], cfg=cfg, seq=c["seq_len"],
                mb=c["micro_batch"], verdict=c["verdict"], pred_fits=r["fits"],
                bottleneck=r.get("bottleneck", ""), bound=r.get("bound", ""))
    out = []
    if not c["measured"]:
        out.append(dict(base, kind="verdict", measured=None, predicted=None, err=None))
    for m in c["measured"]:
        if m["kind"] == "speedup":
            # A published ratio: this config's throughput over the same run with the baseline
            # ds_config (plain ZeRO-3) and, where given, the baseline's own profile overrides (the
            # same run on another network), both simulated.
            bc = dict(c, id=c["id"] + "-baseline", ds_config=m["baseline_ds_config"])
            if "baseline_hw_overrides" in m:
                bc["hw_overrides"] = m["baseline_hw_overrides"]
            rb, _, errb = run_case(bc, tmp, sets)
            if rb is None:
                failures.append((c["id"] + " (baseline)", errb[0]))
                continue
            p = r["samples_per_s"] / rb["samples_per_s"]
            out.append(dict(base, kind="speedup", measured=m["value"], predicted=p, err=p / m["value"] - 1.0))
            continue
        p = predict(m, c, r, prof)
        out.append(dict(base, kind=m["kind"] + ("(" + m["metric"] + ")" if m["kind"] == "peak_memory" else ""),
                        measured=m["value"], predicted=p, err=error(m, p)))
    return out


def evaluate(sets, cases):
    """Simulates `cases` with the profile fields `sets`; returns (rows, failures)."""
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
            results = list(ex.map(lambda c: run_case(c, tmp, sets), cases))
        for c, (r, prof, err) in zip(cases, results):
            if r is None:
                failures.append((c["id"], err[0]))
            else:
                rows.extend(case_rows(c, r, prof, tmp, sets, failures))
    return rows, failures


selected = [c for c in doc["cases"] if not only or only in c["id"]]
rows, failures = ([], []) if fit_mode else evaluate(global_sets, selected)

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


def log_err(e):
    return abs(math.log(1.0 + e)) if e > -1 else float("inf")


def source_costs(rows_):
    """Per source: the mean |ln(zplan / measured)| of its throughput figures."""
    by = {}
    for r in rows_:
        if r["err"] is not None and r["kind"] in THROUGHPUT:
            by.setdefault(r["source"], []).append(log_err(r["err"]))
    return {k: sum(v) / len(v) for k, v in by.items()}


def run_fit():
    """Fit the constants of the fit spec over all sources, then leave each source out."""
    spec = json.load(open(fitspec_path))
    consts = spec["constants"]
    names = [k["pointer"] for k in consts]
    cache = {}
    evals = [0]

    def clamp(k, v):
        v = min(max(v, k["min"]), k["max"])
        return float("%.3g" % v)

    def rows_at(x):
        key = tuple(x[n] for n in names)
        if key not in cache:
            sets = dict(global_sets)
            sets.update(x)
            rws, fails = evaluate(sets, fit_cases)
            if fails:
                raise SystemExit("fidelity.sh --fit: %s failed to simulate at %s: %s" % (fails[0][0], x, fails[0][1]))
            cache[key] = rws
            evals[0] += 1
            sys.stderr.write("fit: simulation %d of the set at %s\n" % (evals[0], json.dumps(x, sort_keys=True)))
        return cache[key]

    def objective(x, leave_out):
        costs = source_costs(rows_at(x))
        vals = [v for s_, v in costs.items() if s_ != leave_out and s_ in fitted]
        # No fitted source left (the only one is left out): nothing to fit, every x is as good.
        return sum(vals) / len(vals) if vals else 0.0

    def search(start, leave_out, steps):
        # Pattern search in log space: try each constant up and down by the step, keep what
        # lowers the objective, shrink the step when nothing does. Deterministic.
        x = dict(start)
        best = objective(x, leave_out)
        for step in steps:
            improved = True
            while improved:
                improved = False
                for k in consts:
                    n = k["pointer"]
                    for d in (step, 1.0 / step):
                        # A line search along the direction: keep going, doubling the move,
                        # while the objective falls.
                        moved = False
                        while True:
                            y = dict(x)
                            y[n] = clamp(k, x[n] * d)
                            if y[n] == x[n]:
                                break
                            f = objective(y, leave_out)
                            if not f < best - 1e-6:
                                break
                            x, best, improved, moved = y, f, True, True
                            d = d * d
                        if moved:
                            break
        # Parsimony: a constant the search moved goes back to the value zplan ships when that
        # costs the objective less than 1e-4 (a hundredth of a percent of error, below every
        # reported figure): a move along a flat direction is not a fit.
        for k in consts:
            n = k["pointer"]
            if x[n] != start[n]:
                y = dict(x)
                y[n] = start[n]
                f = objective(y, leave_out)
                if f < best + 1e-4:
                    x, best = y, min(best, f)
        return x, best

    # Only the cases with a throughput figure move the objective, and only those of the sources
    # the fit may read: a source marked "fitted": false (a DeepSpeed whose mechanism differs from
    # the 0.19 that zplan models, "not_fitted_why") is simulated and reported at the fitted
    # constants, never fitted to. Its leave-one-source-out prediction is the all-source one.
    fit_cases = [c for c in selected if any(m["kind"] in THROUGHPUT for m in c["measured"])]
    start = {k["pointer"]: clamp(k, k["default"]) for k in consts}
    all_sources = sorted({c["source"] for c in fit_cases})
    fitted = {s_ for s_ in all_sources if is_fitted(s_)}
    sources_ = sorted(fitted)
    if not sources_:
        raise SystemExit("fidelity.sh --fit: no case of a fitted source is selected")
    steps = spec.get("steps", [2.0, 1.25, 1.1])
    x_all, f_all = search(start, None, steps)
    folds = {}
    for s_ in sources_:
        folds[s_] = search(x_all, s_, steps[1:])[0]
    all_rows = rows_at(x_all)
    loso_rows = [r for r in all_rows if r["source"] not in fitted]
    for s_ in sources_:
        loso_rows.extend(r for r in rows_at(folds[s_]) if r["source"] == s_)

    def summ(rows_, label):
        t = [(r["id"], r["err"]) for r in rows_ if r["err"] is not None and r["kind"] in THROUGHPUT]
        return summary(label, t)

    out = []
    if markdown:
        out.append("| constant | start | fitted on all sources | " + " | ".join("without " + s_ for s_ in sources_) + " |")
        out.append("|" + "---|" * (3 + len(sources_)))
        for n in names:
            out.append("| `%s` | %s | **%s** | %s |" % (n, fmt(start[n]), fmt(x_all[n]),
                                                   " | ".join(fmt(folds[s_][n]) for s_ in sources_)))
        out.append("")
        out.append("| source | throughput figures | all-fit median error | all-fit worst | leave-one-source-out median | leave-one-source-out worst |")
        out.append("|---|---|---|---|---|---|")
        for s_ in all_sources:
            a = [r["err"] for r in all_rows if r["source"] == s_ and r["err"] is not None and r["kind"] in THROUGHPUT]
            l = [r["err"] for r in loso_rows if r["source"] == s_ and r["err"] is not None and r["kind"] in THROUGHPUT]
            if not a:
                continue
            worst = lambda v: max(v, key=abs)
            out.append("| %s%s | %d | %.0f%% | %s | %.0f%% | %s |" % (
                s_, "" if s_ in fitted else " (not fitted)", len(a),
                100 * statistics.median(abs(e) for e in a), pct(worst(a)),
                100 * statistics.median(abs(e) for e in l), pct(worst(l))))
        out.append("")
        out.append("- " + summ(all_rows, "All-fit throughput"))
        out.append("- " + summ(loso_rows, "Leave-one-source-out throughput"))
        if fitted != set(all_sources):
            out.append("- " + summ([r for r in all_rows if r["source"] in fitted], "All-fit throughput, fitted sources"))
            out.append("- " + summ([r for r in loso_rows if r["source"] in fitted], "Leave-one-source-out throughput, fitted sources"))
            why = {}
            for s_ in all_sources:
                if s_ not in fitted:
                    why.setdefault(doc["sources"][s_].get("not_fitted_why", "-"), []).append(s_)
            out.append("- not fitted: " + "; ".join("%s: %s" % (", ".join(v), k) for k, v in why.items()))
        out.append("- objective (mean over sources of the mean |ln(zplan/measured)|): %.3f at the start, %.3f fitted; %d simulations of the set" % (
            objective(start, None), f_all, evals[0]))
    else:
        out.append("constant" + "".join("  " + n for n in names))
        out.append("start   " + "".join("  " + fmt(start[n]) for n in names))
        out.append("all     " + "".join("  " + fmt(x_all[n]) for n in names))
        for s_ in sources_:
            out.append("w/o %s" % s_ + "".join("  " + fmt(folds[s_][n]) for n in names))
        out.append("")
        for r in all_rows:
            if r["err"] is None or r["kind"] not in THROUGHPUT:
                continue
            l = next(q for q in loso_rows if q["id"] == r["id"] and q["kind"] == r["kind"])
            out.append("%-36s %-14s all-fit %6s  loso %6s" % (r["id"], r["kind"], pct(r["err"]), pct(l["err"])))
        out.append("")
        out.append(summ(all_rows, "All-fit throughput"))
        out.append(summ(loso_rows, "Leave-one-source-out throughput"))
        if fitted != set(all_sources):
            out.append(summ([r for r in all_rows if r["source"] in fitted], "All-fit throughput, fitted sources"))
            out.append(summ([r for r in loso_rows if r["source"] in fitted], "Leave-one-source-out throughput, fitted sources"))
            out.append("not fitted: " + ", ".join(s_ for s_ in all_sources if s_ not in fitted))
        out.append("objective %.3f -> %.3f, %d simulations of the set" % (objective(start, None), f_all, evals[0]))
    print("\n".join(out))


if fit_mode:
    run_fit()
    sys.exit(0)

thr = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"] in THROUGHPUT]
mem = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"].startswith("peak_memory")]
ratios = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"] == "speedup"]
verdicts = {}
for r in rows:
    verdicts[r["id"]] = (r["verdict"], "fits" if r["pred_fits"] else "oom")
wrong = [(i, v) for i, v in verdicts.items() if v[0] != v[1]]
sources = sorted({r["source"] for r in rows})
# The sources the constants are fitted to (cases.json "fitted", default true) and their figures.
unfitted = [s for s in sources if not is_fitted(s)]
thr_fitted = [(r["id"], r["err"]) for r in rows if r["err"] is not None and r["kind"] in THROUGHPUT
              and r["source"] not in unfitted]

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
    if unfitted:
        out.append("- " + summary("Throughput without the sources not fitted to (%s)" % ", ".join(unfitted), thr_fitted))
    out.append("- " + summary("Memory", mem))
    out.append("- " + summary("Ratios (ZeRO++ / MiCS over ZeRO-3; ZeRO-3 on one network over another; ZeRO-2/3 over ZeRO-1; one launcher over another)", ratios))
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
    out.append("What zplan says limits each case (its critical path by kind of work, `bottleneck`, and `bound`):")
    out.append("")
    out.append("| case | zplan's critical path | bound by |")
    out.append("|---|---|---|")
    seen = set()
    for r in rows:
        if r["id"] not in seen:
            seen.add(r["id"])
            out.append("| %s | %s | %s |" % (r["id"], r["bottleneck"], r["bound"]))
else:
    w = [max(len(h), 8) for h in hdr]
    for i, key in ((0, "id"), (1, "ds"), (2, "hw"), (4, "cfg"), (7, "kind")):
        w[i] = max([len(str(r[key])) for r in rows] + [w[i]])
    line = lambda cells: "  ".join(str(x).ljust(w[i]) for i, x in enumerate(cells))
    out.append(line(hdr))
    for r in rows:
        v = "%s/%s%s" % (r["verdict"], "fits" if r["pred_fits"] else "oom", "" if r["verdict"] == ("fits" if r["pred_fits"] else "oom") else "  WRONG")
        out.append(line([r["id"], r["ds"], r["hw"], r["gpus"], r["cfg"], r["seq"], r["mb"], r["kind"], fmt(r["measured"]),
                         fmt(r["predicted"]), pct(r["err"]), v]))
    out.append("")
    out.append(summary("Throughput", thr))
    if unfitted:
        out.append(summary("Throughput without the sources not fitted to (%s)" % ", ".join(unfitted), thr_fitted))
    out.append(summary("Memory", mem))
    out.append(summary("Ratios (ZeRO++ / MiCS over ZeRO-3; ZeRO-3 on one network over another; ZeRO-2/3 over ZeRO-1; one launcher over another)", ratios))
    out.append("Verdicts: %d of %d right" % (len(verdicts) - len(wrong), len(verdicts)))
    for i, v in wrong:
        out.append("  wrong: %s (measured %s, zplan %s)" % (i, v[0], v[1]))
    out.append("%d cases, %d figures, %d sources" % (len(verdicts), len(thr) + len(mem), len(sources)))
for f in failures:
    out.append("FAILED to simulate %s: %s" % f)
print("\n".join(out))
sys.exit(1 if failures else 0)
PY
