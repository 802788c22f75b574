// The examples are golden end-to-end tests: every `zplan memory` command that examples/README.md
// shows is run as written, and again as `zplan simulate`; their headline numbers must match
// tests/golden/examples.json within a tolerance. When the model changes on purpose, regenerate
// the golden file with scripts/update-golden.sh (ZPLAN_UPDATE_GOLDEN=1) and review the diff.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

// Relative tolerance: the outputs are deterministic, so this only absorbs floating-point
// differences between compilers and flags.
constexpr double kTolerance = 1e-6;

// The `zplan ...` lines of the README's code blocks, without the leading "zplan".
std::vector<std::string> readme_commands(const std::string& readme, const std::string& verb) {
  std::vector<std::string> out;
  std::istringstream in(readme);
  std::string line;
  bool in_code = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code;
      continue;
    }
    const std::string prefix = "zplan " + verb + " ";
    if (in_code && line.rfind(prefix, 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

double at(const nlohmann::json& j, const char* pointer) {
  return j.at(nlohmann::json::json_pointer(pointer)).get<double>();
}

TEST_CASE("every example in examples/README.md runs and matches its golden numbers",
          "[cli][golden]") {
  const std::string root = ZPLAN_SOURCE_DIR;
  const auto commands = readme_commands(slurp(root + "/examples/README.md"), "memory");
  REQUIRE(commands.size() >= 10);
  const bool update = std::getenv("ZPLAN_UPDATE_GOLDEN") != nullptr;
  const std::string golden_path = root + "/tests/golden/examples.json";
  nlohmann::json golden = update ? nlohmann::json::object()
                                 : nlohmann::json::parse(slurp(golden_path));
  for (const std::string& memory_cmd : commands) {
    std::string simulate_cmd = "simulate" + memory_cmd.substr(std::string("memory").size());
    RunResult m = run_zplan(memory_cmd + " --json");
    RunResult s = run_zplan(simulate_cmd + " --json");
    INFO(memory_cmd << "\n" << m.err << s.err);
    REQUIRE(m.exit_code == 0);
    REQUIRE(s.exit_code == 0);
    nlohmann::json mj = nlohmann::json::parse(m.out);
    nlohmann::json sj = nlohmann::json::parse(s.out);
    nlohmann::json got = {
        {"memory_gpu_peak_bytes", at(mj, "/memory/tiers/gpu/peak_bytes")},
        {"memory_host_peak_bytes", at(mj, "/memory/host_peak_bytes")},
        {"simulate_step_time_s", at(sj, "/result/step_time_s")},
        {"simulate_gpu_peak_bytes", at(sj, "/result/memory/gpu/peak_bytes")},
        {"simulate_tflops_per_gpu", at(sj, "/result/tflops_per_gpu")}};
    if (update) {
      golden[memory_cmd] = got;
      continue;
    }
    REQUIRE(golden.contains(memory_cmd));
    for (const auto& [key, value] : got.items()) {
      INFO(key);
      CHECK(value.get<double>() ==
            Approx(golden[memory_cmd][key].get<double>()).epsilon(kTolerance));
    }
  }
  if (update) write_file_atomically(golden_path, golden.dump(2) + "\n", /*overwrite=*/true);
}

TEST_CASE("every Hugging Face example config loads through the CLI", "[cli]") {
  for (const char* file : {"Meta-Llama-3-8B.json", "Mistral-7B-v0.1.json", "gpt2.json",
                           "Mixtral-8x7B-v0.1.json", "falcon-7b.json"}) {
    RunResult r = run_zplan(std::string("memory --model examples/hf/") + file +
                            " --gpus 8 --hw h100 --stage 3 --checkpointing full");
    INFO(file << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("GPU:") != std::string::npos);
  }
  // A mixture of experts says how many parameters a token uses besides how many there are.
  RunResult moe = run_zplan("memory --model examples/hf/Mixtral-8x7B-v0.1.json --gpus 8 "
                            "--hw h100 --stage 3");
  CHECK(moe.out.find("(46.70 B params, 12.88 B active)") != std::string::npos);
}

TEST_CASE("a simulated trace is valid Chrome trace JSON with a track per resource",
          "[cli]") {
  char dir_template[] = "/tmp/zplan-trace-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string path = dir + "/t.json";
  RunResult r = run_zplan("simulate --model 1.3b --gpus 8 --hw a100 --stage 3 --gas 2 "
                          "--offload-optimizer cpu --trace " + path);
  REQUIRE(r.exit_code == 0);
  nlohmann::json t = nlohmann::json::parse(slurp(path));
  const auto& events = t.at("traceEvents");
  int slices = 0, counters = 0, names = 0;
  double end = 0;
  for (const auto& e : events) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++slices;
      CHECK(e.at("dur").get<double>() >= 0);
      end = std::max(end, e.at("ts").get<double>() + e.at("dur").get<double>());
    } else if (ph == "C") {
      ++counters;
    } else if (ph == "M" && e.at("name") == "thread_name") {
      ++names;
    }
  }
  CHECK(names == 8);
  CHECK(slices > 100);
  CHECK(counters > 10);
  CHECK(end > 0);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace zplan::testing
