// `zplan models`: the built-in model presets and stock hardware profiles, so users can see what
// --model and --hw accept without reading the source.
#include <iostream>
#include <memory>

#include "base/text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/table.h"
#include "hardware/profile.h"
#include "models/catalog.h"

namespace zplan::cli {

namespace {

int run_models(bool json) {
  nlohmann::json out = {{"models", nlohmann::json::array()}, {"hardware", nlohmann::json::array()}};
  Table models_table({"model", "family", "params", "layers", "hidden", "heads", "kv", "ffn",
                      "vocab", "seq"},
                     {false, false, true, true, true, true, true, true, true, true});
  for (const std::string& name : models::preset_names()) {
    models::Model m = models::load_model(name);
    const models::ModelShape& s = m.shape();
    out["models"].push_back({{"name", name},
                             {"family", models::family_name(s.family)},
                             {"params", m.num_params()},
                             {"layers", s.layers},
                             {"hidden", s.hidden},
                             {"default_seq_len", s.default_seq_len}});
    models_table.add_row({name, models::family_name(s.family), std::to_string(m.num_params()),
                          std::to_string(s.layers), std::to_string(s.hidden),
                          std::to_string(s.heads), std::to_string(s.kv_heads),
                          std::to_string(s.ffn), std::to_string(s.vocab),
                          std::to_string(s.default_seq_len)});
  }
  Table hw_table({"hardware", "GPU", "GPU memory GiB", "GPUs/node", "peak TFLOP/s",
                  "intra busbw GB/s"},
                 {false, false, true, true, true, true});
  for (const std::string& name : hardware::stock_profile_names()) {
    hardware::Profile p = hardware::load_profile(name);
    out["hardware"].push_back({{"name", name}, {"gpu", p.gpu.name}});
    hw_table.add_row({name, p.gpu.name, strformat("%.1f", p.gpu.memory_bytes / kGiB),
                      std::to_string(p.node.gpus_per_node),
                      strformat("%.0f", p.gpu.peak_flops_per_s / 1e12),
                      strformat("%.0f", p.node.intra_busbw_bytes_per_s / 1e9)});
  }
  out["hf_model_types"] = models::hf_model_types();
  if (json) {
    std::cout << out.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << "Model presets (--model NAME; or a Hugging Face config.json path):\n";
  models_table.print(std::cout, "  ");
  std::string types;
  for (const std::string& t : models::hf_model_types()) types += (types.empty() ? "" : ", ") + t;
  std::cout << "\nHugging Face config.json model_type (--model path/to/config.json; "
               "docs/models.md):\n  "
            << types << '\n';
  std::cout << "\nStock hardware profiles (--hw NAME or NAME.json; or a profile file):\n";
  hw_table.print(std::cout, "  ");
  return kExitOk;
}

}  // namespace

void setup_models_command(CLI::App& app, Action* action) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("models", "list the model presets and stock hardware profiles");
  sub->add_flag("--json", *json, "print JSON");
  sub->callback([json, action] { *action = [json] { return run_models(*json); }; });
}

}  // namespace zplan::cli
