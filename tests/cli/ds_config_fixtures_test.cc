// Real users' ds_config.json files (tests/fixtures/ds_configs/, sources in its manifest.json),
// each run through `zplan simulate --ds-config` as a user would: it is read (and its resolved
// knobs are what DeepSpeed 0.19.5 resolves, as tools/ds-config-check reports them), or refused
// with the reason DeepSpeed gives, or refused as "not modelled: <feature>".
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

using nlohmann::json;

const std::string kDir = "tests/fixtures/ds_configs/";

json manifest() {
  return json::parse(slurp(std::string(ZPLAN_SOURCE_DIR) + "/" + kDir + "manifest.json"));
}

// The command for one case: a small model, so that each simulation takes well under a second;
// the reading path (resolve_setup, then parse_ds_config) is the one every model takes. The
// "auto" sizes the Trainer fills depend on the model's hidden size (768 for 125m).
std::string command(const json& c) {
  std::string cmd = "simulate --model 125m --hw a100 --json --gpus " +
                    std::to_string(c.at("gpus").get<int>()) + " --ds-config " + kDir +
                    c.at("file").get<std::string>();
  if (c.contains("flags")) cmd += " " + c.at("flags").get<std::string>();
  return cmd;
}

TEST_CASE("every fixture ds_config is read or refused as its manifest records", "[cli]") {
  const json cases = manifest().at("cases");
  REQUIRE(cases.size() >= 20);
  int read = 0, refused = 0;
  for (const json& c : cases) {
    const std::string cmd = command(c);
    INFO("zplan " << cmd);
    const RunResult r = run_zplan(cmd);
    INFO("stdout: " << r.out.substr(0, 2000));
    INFO("stderr: " << r.err);
    CHECK(r.err.find("terminate called") == std::string::npos);
    const std::string outcome = c.at("outcome").get<std::string>();
    if (outcome == "read") {
      ++read;
      // Exit 3 is "does not fit": the file was read and simulated.
      CHECK((r.exit_code == 0 || r.exit_code == 3));
      if (r.exit_code != 0 && r.exit_code != 3) continue;
      const json out = json::parse(r.out);
      const json& ds = out.at("ds_config");
      for (const auto& [pointer, want] : c.at("expect").items()) {
        INFO(pointer);
        const json::json_pointer p(pointer);
        // The echo writes only the zero_optimization keys its stage reads (issue 15: a key a
        // stage ignores would look as if it mattered); the batch keys, the stage and the
        // precision are always there.
        const bool stage_specific = pointer.rfind("/zero_optimization/", 0) == 0 &&
                                    pointer != "/zero_optimization/stage";
        if (stage_specific && !ds.contains(p)) continue;
        REQUIRE(ds.contains(p));
        CHECK(ds.at(p) == want);
      }
    } else {
      REQUIRE(outcome == "refused");
      ++refused;
      CHECK(r.exit_code == 1);
      CHECK(r.err.rfind("zplan: ", 0) == 0);
      for (const json& fragment : c.at("errors")) {
        CHECK_THAT(r.err, Catch::Matchers::Contains(fragment.get<std::string>()));
      }
      // One line per problem, and only the problems listed.
      CHECK(count_lines(r.err) == static_cast<int>(c.at("errors").size()));
    }
  }
  CHECK(read > 0);
  CHECK(refused > 0);
}

TEST_CASE("every fixture file is in the manifest, with its source", "[cli]") {
  const json m = manifest();
  std::vector<std::string> listed;
  for (const json& s : m.at("sources")) {
    INFO(s.dump());
    CHECK(!s.at("repository").get<std::string>().empty());
    CHECK(!s.at("path").get<std::string>().empty());
    CHECK(s.at("commit").get<std::string>().size() == 40);
    CHECK(!s.at("licence").get<std::string>().empty());
    listed.push_back(s.at("file").get<std::string>());
  }
  CHECK(listed.size() >= 20);
  for (const json& c : m.at("cases")) {
    INFO(c.at("file"));
    CHECK(std::find(listed.begin(), listed.end(), c.at("file").get<std::string>()) != listed.end());
  }
  for (const std::string& file : listed) {
    INFO(file);
    CHECK(!slurp(std::string(ZPLAN_SOURCE_DIR) + "/" + kDir + file).empty());
  }
}

}  // namespace
}  // namespace zplan::testing
