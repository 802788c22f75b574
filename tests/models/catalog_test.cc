// load_model: presets, files, zplan model files, and the errors a user can provoke.
#include <string>

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "base/json_reader.h"
#include "models/model.h"
#include "tests/models/test_util.h"

namespace zplan::models {
namespace {

using testing::data_path;
using testing::example_path;
using testing::input_error_of;

Model zplan_from_text(const std::string& text) {
  return model_from_zplan_json(parse_json_text(text, "m.json"), "m.json");
}

std::string zplan_error(const std::string& text) {
  return input_error_of([&] { zplan_from_text(text); });
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("zplan model files", "[models]") {
  // Llama family defaults (RMSNorm, SwiGLU, no biases) with a tied head, d = 64, g*d = 128:
  // 4*(2*512^2 + 2*512*128 + 3*512*1376 + 2*512) + 8000*512 + 512 = 15,176,192.
  Model m = load_model(data_path("zplan-llama-tiny.json"));
  CHECK(m.name() == "my-llama");
  CHECK(m.num_params() == 15'176'192);
  CHECK(m.shape().norm == Norm::kRmsNorm);
  CHECK(m.shape().default_seq_len == 1024);

  // MLP: 3*(64^2 + 64); the name comes from the file.
  Model mlp = load_model(data_path("zplan-mlp.json"));
  CHECK(mlp.name() == "zplan-mlp");
  CHECK(mlp.num_params() == 3 * (64 * 64 + 64));
  CHECK(mlp.shape().default_seq_len == 1);
}

TEST_CASE("a zplan file spelling out a preset's fields gives the same model", "[models]") {
  Model preset = load_model("20b");
  Model file = zplan_from_text(R"({"family": "neox", "name": "neox", "layers": 44,
    "hidden": 6144, "heads": 64, "kv_heads": 64, "head_dim": 96, "ffn": 24576, "vocab": 50432,
    "max_positions": 0, "tied_embeddings": false, "linear_bias": true, "qkv_bias": false,
    "attn_out_bias": false, "mlp_bias": false, "dropout": false, "attention_dropout": true,
    "parallel_residual": true, "pre_norm": true, "final_norm": true, "norm": "layernorm",
    "activation": "gelu", "embed_proj_dim": 0, "default_seq_len": 2048})");
  CHECK(file.num_params() == preset.num_params());
  CHECK(file.num_param_tensors() == preset.num_param_tensors());
  CHECK(file.forward_flops(2048, 1) == preset.forward_flops(2048, 1));
  ActivationOptions o;
  CHECK(file.layer_activations(1, 2048, 1, o).stored_bytes ==
        preset.layer_activations(1, 2048, 1, o).stored_bytes);

  // GPT family defaults: tied, biases, LayerNorm, GeLU: tiny-gpt's count.
  CHECK(zplan_from_text(R"({"family": "gpt", "layers": 2, "hidden": 256, "heads": 4,
    "ffn": 1024, "vocab": 4096, "max_positions": 256})").num_params() ==
        load_model("tiny-gpt").num_params());
}

TEST_CASE("bad zplan model files name the key", "[models]") {
  CHECK(zplan_error(R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10, "colour": "red"})") == "m.json: /colour: unknown key");
  CHECK(zplan_error(R"({"family": "llama", "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10})") == "m.json: /layers: missing (expected an integer)");
  CHECK(zplan_error(R"({"family": "bert"})") ==
        "m.json: /family: must be one of gpt, opt, neox, llama, gptj, falcon, mlp; got \"bert\"");
  CHECK(zplan_error(R"({"layers": 2})") == "m.json: /family: missing (expected a string)");
  CHECK(zplan_error(R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10, "norm": "batchnorm"})") ==
        "m.json: /norm: must be \"layernorm\" or \"rmsnorm\", got \"batchnorm\"");
  CHECK(zplan_error(R"({"family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10, "activation": "tanh", "max_positions": 8})") ==
        "m.json: /activation: must be \"gelu\", \"relu\" or \"swiglu\", got \"tanh\"");
  CHECK(zplan_error(R"({"family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10})") == "m.json: /max_positions: missing (expected an integer)");
  CHECK(zplan_error(R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 5, "ffn": 64,
    "vocab": 10})") == "m.json: /heads: must divide hidden (64), got 5");
  CHECK(zplan_error(R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 4,
    "kv_heads": 3, "ffn": 64, "vocab": 10})") == "m.json: /kv_heads: must divide heads (4), got 3");
  CHECK(zplan_error(R"({"family": "llama", "layers": -2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10})") == "m.json: /layers: must be a positive integer, got -2");
  CHECK(zplan_error(R"({"family": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn": 64,
    "vocab": 10, "dropout": 1})") == "m.json: /dropout: must be true or false, got 1");
  CHECK(zplan_error(R"({"family": "llama", "layers": 2.5, "hidden": 64, "heads": 4,
    "ffn": 64, "vocab": 10})") == "m.json: /layers: must be an integer, got 2.5");
  CHECK(zplan_error(R"({"family": "mlp", "layers": 2, "hidden": 64, "heads": 4})") ==
        "m.json: /heads: not used by the mlp family (it takes layers, hidden, default_seq_len)");
  CHECK(zplan_error(R"({"family": "mlp", "layers": 2})") ==
        "m.json: /hidden: missing (expected an integer)");
  CHECK(zplan_error(R"("llama")") == "m.json: must be a JSON object, got \"llama\"");
}

TEST_CASE("load_model: paths and names", "[models]") {
  CHECK(load_model(example_path("gpt2.json")).name() == "gpt2");
  CHECK(load_model(data_path("Llama-2-7b-hf/config.json")).name() == "Llama-2-7b-hf");
  // A Hugging Face model folder stands for its config.json.
  CHECK(load_model(data_path("Llama-2-7b-hf")).name() == "Llama-2-7b-hf");
  CHECK(load_model(data_path("Llama-2-7b-hf/")).num_params() ==
        load_model(data_path("Llama-2-7b-hf/config.json")).num_params());
  const std::string folder = data_path("");
  CHECK(input_error_of([&] { load_model(folder); }) ==
        folder + ": is a directory without a config.json (a Hugging Face model folder holds one); "
                 "give the config file or a preset");
}

TEST_CASE("load_model errors name the flag or the file", "[models]") {
  std::string unknown = input_error_of([] { load_model("gpt-5"); });
  CHECK(contains(unknown, "--model: unknown model 'gpt-5'; presets: 125m, 350m,"));
  CHECK(contains(unknown, "tiny-llama, or give a path to a config.json"));

  CHECK(input_error_of([] { load_model("./nope/config.json"); }) ==
        "--model: no such file './nope/config.json' (and no preset has that name)");
  CHECK(input_error_of([] { load_model("nope.json"); }) ==
        "--model: no such file 'nope.json' (and no preset has that name)");
  CHECK(contains(input_error_of([] { load_model(""); }), "--model: is empty; presets: 125m"));

  std::string malformed = data_path("malformed.json");
  std::string error = input_error_of([&] { load_model(malformed); });
  // nlohmann reports the position after the unexpected token ("vocab_size" on line 5).
  CHECK(contains(error, malformed + ": line 5, column "));
  CHECK(contains(error, "invalid JSON"));

  std::string array = data_path("not-an-object.json");
  CHECK(input_error_of([&] { load_model(array); }) ==
        array + ": must be a JSON object (a Hugging Face config.json or a zplan model file), "
                "got an array");

  std::string neither = data_path("neither.json");
  CHECK(input_error_of([&] { load_model(neither); }) ==
        neither + ": neither a Hugging Face config.json (no \"model_type\") nor a zplan model "
                  "file (no \"family\")");

  // A folder is a model folder only with a config.json in it ("load_model: paths and names").
  std::string dir = data_path("");
  CHECK(contains(input_error_of([&] { load_model(dir); }), dir + ": is a directory without"));
}

}  // namespace
}  // namespace zplan::models
