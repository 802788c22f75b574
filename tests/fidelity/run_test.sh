#!/usr/bin/env bash
# ctest "fidelity set" (tests/CMakeLists.txt): the public fidelity set (docs/fidelity.md) still
# runs end to end with this build -- every case simulates, the summaries are printed -- and
# `fidelity.sh --fit` never reads a source the case file marks "fitted": false: the constants it
# fits with such a source's cases selected are the ones it fits without them. A set of one's own
# (docs/formats.md, "Fidelity case file") runs with its files next to it, and a broken one stops
# with one line naming the case and the field.
#
#   tests/fidelity/run_test.sh ZPLAN_BINARY
set -euo pipefail
zplan="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fidelity="$here/scripts/fidelity.sh"
fail() { echo "fidelity set: $*" >&2; exit 1; }

# The whole set: fidelity.sh exits 1 when a case fails to simulate.
out="$("$fidelity" --zplan "$zplan")" || fail "a case did not simulate: $(grep FAILED <<<"$out" || true)"
grep -q '^Throughput: [0-9]* figures, median' <<<"$out" || fail "no throughput summary"
grep -q '^Memory: [0-9]* figures, median' <<<"$out" || fail "no memory summary"
grep -q '^Verdicts: [0-9]* of [0-9]* right' <<<"$out" || fail "no verdict summary"
grep -q '^Throughput without the sources not fitted to (bigscience-jz, megatron21): ' <<<"$out" ||
  fail "no summary without the sources marked \"fitted\": false"

# The fit with one constant from 0.8 in steps of 1.15: "mbs6" selects a ds-autotuning case
# (fitted, too slow at 0.575) and a bigscience-jz case (not fitted, too fast); "gpt2m-mbs6" the
# ds-autotuning case alone. Were the bigscience-jz case read, it would pull the constant lower
# (0.605 against 0.696 on 2026-11-28's build), so the two fits must agree exactly.
spec="$(mktemp)"
trap 'rm -f "$spec"' EXIT
cat > "$spec" <<'JSON'
{"steps": [1.15],
 "constants": [{"pointer": "/gpu/framework_efficiency", "default": 0.8, "min": 0.3, "max": 1.0}]}
JSON
with="$("$fidelity" --zplan "$zplan" --fit --fit-spec "$spec" --only mbs6 2>&1)" ||
  fail "--fit failed: $(tail -1 <<<"$with")"
without="$("$fidelity" --zplan "$zplan" --fit --fit-spec "$spec" --only gpt2m-mbs6 2>&1)" ||
  fail "--fit failed: $(tail -1 <<<"$without")"
grep -q '^not fitted: bigscience-jz$' <<<"$with" || fail "the fit does not name bigscience-jz as not fitted"
grep -q '^bigscience-jz-z3-mbs6 .*all-fit' <<<"$with" || fail "the not-fitted case is not reported"
if grep -q '^w/o bigscience-jz' <<<"$with"; then fail "a not-fitted source was left out as if fitted"; fi
a="$(grep '^all ' <<<"$with" || true)"
b="$(grep '^all ' <<<"$without" || true)"
[[ -n "$a" && "$a" == "$b" ]] || fail "the fitted constants depend on a not-fitted source: '$a' vs '$b'"
# A set of one's own (docs/formats.md, "Fidelity case file"): the model config and the profile
# next to the case file, the optional fields left out, figures in tokens/s.
own="$(mktemp -d)"
trap 'rm -f "$spec"; rm -rf "$own"' EXIT
cat > "$own/config.json" <<'JSON'
{"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
 "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
 "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
JSON
sed 's/"name": "h100"/"name": "own-h100"/' "$here/hardware/h100.json" > "$own/own-h100.json"
cat > "$own/cases.json" <<'JSON'
{"cases": [{"id": "own-1", "source": "own", "model": "config.json", "hw": "own-h100.json",
  "gpus": 16, "seq_len": 2048, "verdict": "fits",
  "ds_config": {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
                "zero_optimization": {"stage": 3}},
  "measured": [{"kind": "tokens_per_s_per_gpu", "value": 30000}, {"kind": "tokens_per_s", "value": 480000}]}]}
JSON
mine="$("$fidelity" --zplan "$zplan" --cases "$own/cases.json")" || fail "a set of one's own did not run: $(tail -1 <<<"$mine")"
# 2 nodes (16 GPUs over the profile's 8 a node); per GPU and all-GPU figures agree with each other.
grep -q '^own-1 .* own-h100.json  *16 .*tokens_per_s_per_gpu' <<<"$mine" || fail "no per-GPU tokens/s row: $mine"
[[ "$(grep -o '[-+][0-9]*%' <<<"$mine" | sort -u | wc -l)" == 1 ]] || fail "tokens/s per GPU and in all disagree: $mine"
# A broken case stops the run with one line naming the case and the field.
sed 's/"gpus": 16, //' "$own/cases.json" > "$own/broken.json"
if err="$("$fidelity" --zplan "$zplan" --cases "$own/broken.json" 2>&1)"; then fail "a case without gpus ran"; fi
[[ "$err" == "fidelity.sh: $own/broken.json: case 'own-1': 'gpus' is missing" ]] || fail "unexpected error: $err"

# A case runs with the transformers release of its date unless it names one: a mixture of
# experts of DeepSpeed 0.16 is built as transformers 4.x built it, one of 0.19 as 5, and
# "transformers": "4" overrides the date.
moe() {  # id, deepspeed_version, extra members
  printf '{"id": "%s", "source": "own", "model": "examples/hf/Mixtral-8x7B-v0.1.json", "hw": "h100",
    "gpus": 32, "seq_len": 1024, "verdict": "fits", "deepspeed_version": "%s"%s,
    "ds_config": {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                  "zero_optimization": {"stage": 3}},
    "measured": [{"kind": "tokens_per_s_per_gpu", "value": 500}]}' "$1" "$2" "$3"
}
printf '{"cases": [%s, %s, %s]}' "$(moe old '0.16.6 (April 2025)' '')" "$(moe new '0.19.2' '')" \
  "$(moe pinned '0.19.2' ', "transformers": "4"')" > "$own/moe.json"
moe_out="$("$fidelity" --zplan "$zplan" --cases "$own/moe.json")" || fail "the MoE set did not run: $(tail -1 <<<"$moe_out")"
pred() { grep "^$1 " <<<"$moe_out" | grep -o '[-+][0-9]*%' | head -1; }
[[ -n "$(pred old)" && "$(pred old)" == "$(pred pinned)" ]] || fail "a 0.16 case is not run as transformers 4: $moe_out"
[[ "$(pred new)" != "$(pred old)" ]] || fail "a 0.19 case is run as transformers 4: $moe_out"

echo "fidelity set: ok ($(grep '^Throughput: ' <<<"$out"))"
