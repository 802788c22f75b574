// An interrupted calibration leaves nothing behind: the signal handlers remove registered
// temporary files, the final write completes or never starts, and a `zplan calibrate` killed
// halfway (a real child process) leaves no output file and no temporary file.
#include "calibrate/interrupt.h"

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <signal.h>

#include "hardware/profile.h"
#include "tests/calibrate/calibrate_test_util.h"

namespace zplan::calibrate {
namespace {

using testing::TempDir;

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void touch(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) close(fd);
}

// Runs `child` in a forked process; returns its wait status.
template <typename F>
int in_child(F child) {
  pid_t pid = fork();
  if (pid == 0) {
    child();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_CASE("SIGTERM removes registered temporary files and kills as SIGTERM would",
          "[calibrate][interrupt]") {
  TempDir dir;
  const std::string temp = dir.path() + "/.scratch";
  const std::string kept = dir.path() + "/kept";
  int status = in_child([&] {
    InterruptGuard guard;
    touch(temp);
    touch(kept);
    register_temp_path(temp);
    int other = register_temp_path(kept);
    unregister_temp_path(other);
    raise(SIGTERM);
    _exit(3);  // not reached
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(!exists(temp));
  CHECK(exists(kept));
}

TEST_CASE("a signal during the final write waits until the write is done",
          "[calibrate][interrupt]") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  int status = in_child([&] {
    InterruptGuard guard;
    with_signals_blocked([&] {
      raise(SIGINT);  // pending until the block ends
      touch(out);
    });
    _exit(3);  // not reached: SIGINT is delivered when signals are unblocked
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  CHECK(exists(out));
}

#ifdef ZPLAN_BINARY
// Starts `zplan calibrate <args>` with stderr piped back; returns its pid and the pipe.
pid_t start_zplan(const std::vector<std::string>& args, int* stderr_fd) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>("zplan"));
    argv.push_back(const_cast<char*>("calibrate"));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(ZPLAN_BINARY, argv.data());
    _exit(127);
  }
  close(fds[1]);
  *stderr_fd = fds[0];
  return pid;
}

// Reads the child's stderr until `marker` appears (or it closes); returns what was read.
std::string read_until(int fd, const std::string& marker) {
  std::string seen;
  char buf[512];
  while (seen.find(marker) == std::string::npos) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, size_t(n));
  }
  return seen;
}

TEST_CASE("killing a calibration halfway leaves no partial output file", "[calibrate][interrupt]") {
  TempDir dir;
  const std::string out = dir.path() + "/profile.json";
  int err = -1;
  // The fake backend sleeps 20 ms per timed call: ~7 s in all, killed just after it starts
  // the collectives.
  pid_t pid = start_zplan({"--backend", "fake", "--fake-delay-ms", "20", "--out", out}, &err);
  std::string seen = read_until(err, "fake: host numbers");
  INFO(seen);
  REQUIRE(seen.find("fake: host numbers") != std::string::npos);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  close(err);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(TempDir::entries(dir.path()).empty());
}

TEST_CASE("a calibration that runs to the end writes the whole profile", "[calibrate][interrupt]") {
  TempDir dir;
  const std::string out = dir.path() + "/profile.json";
  int err = -1;
  pid_t pid = start_zplan({"--backend", "fake", "--out", out}, &err);
  std::string seen = read_until(err, "\x04");  // everything, until it closes
  int status = 0;
  waitpid(pid, &status, 0);
  close(err);
  INFO(seen);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(TempDir::entries(dir.path()) == std::vector<std::string>{"profile.json"});
  hardware::Profile p = hardware::load_profile(out);
  CHECK(p.name == "profile");
  CHECK(p.collectives.size() == 3);
}

TEST_CASE("killing a host calibration during its NVMe probe leaves no scratch file",
          "[.slow][calibrate-slow]") {
  TempDir dir;
  const std::string out = dir.path() + "/cpu.json";
  int err = -1;
  pid_t pid = start_zplan({"--backend", "host", "--nvme-path", dir.path(), "--out", out}, &err);
  std::string seen = read_until(err, "host: adam");  // the NVMe probe comes next
  REQUIRE(seen.find("host: adam") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  close(err);
  CHECK(WIFSIGNALED(status));
  CHECK(TempDir::entries(dir.path()).empty());
}
#endif  // ZPLAN_BINARY

}  // namespace
}  // namespace zplan::calibrate
