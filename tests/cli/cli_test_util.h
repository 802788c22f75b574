// Running the real `zplan` binary from tests, as a user would: exit code, stdout, stderr.
#ifndef ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_
#define ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace zplan::testing {

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

}  // namespace zplan::testing

#endif  // ZPLAN_TESTS_CLI_CLI_TEST_UTIL_H_
