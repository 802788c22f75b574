// Running the real `zplan` binary from tests, as a user would: exit code, stdout, stderr.
#ifndef ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_
#define ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace zplan::testing {

// The commands that read a whole training setup and print what it needs.
inline constexpr const char* kSetupCommands[] = {"memory", "simulate"};

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `zplan <args>` through the shell (args are shell words) in the source directory.
inline RunResult run_zplan(const std::string& args) {
  static int counter = 0;
  const std::string base = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                           "/zplan-cli-test-" + std::to_string(getpid()) + "-" +
                           std::to_string(counter++);
  const std::string cmd = std::string("cd '") + ZPLAN_SOURCE_DIR + "' && '" + ZPLAN_BINARY +
                          "' " + args + " >'" + base + ".out' 2>'" + base + ".err'";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  if (!s.empty() && s.back() != '\n') ++n;
  return n;
}

// A bad input as users must see it: exit `code`, one line on stderr starting "zplan: " and
// naming `mentions`, and no C++ runtime abort.
inline void expect_one_line_error(const RunResult& r, int code, const std::string& mentions) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == code);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("zplan: ", 0) == 0);
  CHECK(r.err.find(mentions) != std::string::npos);
  CHECK(r.err.find("terminate called") == std::string::npos);
}

// A one-GPU-batch bf16 ds_config whose zero_optimization block holds `zero` (JSON members).
inline std::string ds_config(const std::string& zero) {
  return R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
             "bf16": {"enabled": true}, "zero_optimization": {)" +
         zero + "}}";
}

// A file in a fresh temporary directory with the given content; removed at scope end.
struct TempFile {
  explicit TempFile(const std::string& content, const std::string& name = "input.json") {
    char tmpl[] = "/tmp/zplan-bad-XXXXXX";
    dir = mkdtemp(tmpl);
    path = dir + "/" + name;
    std::ofstream(path) << content;
  }
  ~TempFile() {
    std::remove(path.c_str());
    rmdir(dir.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string dir, path;
};

}  // namespace zplan::testing

#endif  // ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_
