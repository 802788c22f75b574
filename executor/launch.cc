#include "executor/launch.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "executor/executor.h"
#include "base/input_error.h"
#include "kernels/cpu_threads.h"

namespace zplan::executor {

namespace {

// Set in the environment of the ranks a re-launch starts, so that they never re-launch again.
constexpr const char* kRelaunchedVar = "ZPLAN_VALIDATE_RELAUNCHED";

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// This process's own command line (argv[0] excluded).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  if (!args.empty()) args.erase(args.begin());
  return args;
}

std::string own_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw InputError("zplan validate", "cannot find its own executable to re-launch");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

bool relaunched() { return std::getenv(kRelaunchedVar) != nullptr; }

bool needs_mpirun(int ranks) {
  if (!kernels::mpi_launcher_variable().empty() || ranks <= 1) return false;
  if (relaunched()) {
    throw InputError("zplan validate", "was re-launched under mpirun but sees no MPI launcher");
  }
  if (!kernels::comm_has_mpi()) {
    throw InputError("--ranks",
                     "this zplan was built without MPI (configure with "
                     "-DZPLAN_WITH_MPI=ON); only --ranks 1 runs");
  }
  return true;
}

std::vector<std::string> open_mpi_binding(int ranks, int cpus) {
  // Open MPI's own default binds each of up to 2 ranks to a single core, which would leave a
  // rank's BLAS threads (its share of the cores) taking turns on that core.
  if (ranks >= 1 && ranks <= cpus) {
    return {"--map-by", "slot:PE=" + std::to_string(cpus / ranks), "--bind-to", "core"};
  }
  return {"--bind-to", "none"};
}

RelaunchResult relaunch_under_mpirun(int ranks) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw InputError("--ranks", std::to_string(ranks) +
                                    " ranks run as MPI processes, but mpirun is not on PATH "
                                    "(apt-get install openmpi-bin), or use --ranks 1");
  }
  std::vector<std::string> argv{mpirun};
  // Open MPI (ompi_info beside mpirun) refuses root and more ranks than cores without these.
  const std::string dir = mpirun.substr(0, mpirun.rfind('/'));
  if (access((dir + "/ompi_info").c_str(), X_OK) == 0) {
    argv.insert(argv.end(), {"--allow-run-as-root", "--oversubscribe"});
    for (std::string& a : open_mpi_binding(ranks, kernels::usable_cpus())) argv.push_back(a);
  }
  argv.insert(argv.end(), {"-np", std::to_string(ranks), own_executable()});
  for (const std::string& a : own_arguments()) argv.push_back(a);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) throw InputError("zplan validate", "fork failed");
  if (pid == 0) {
    setenv(kRelaunchedVar, "1", 1);
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(mpirun.c_str(), cargv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw InputError("zplan validate", "lost track of mpirun");
  }
  RelaunchResult result;
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code == 127) throw InputError(mpirun, "could not be started");
  } else {
    result.signal = WTERMSIG(status);
  }
  return result;
}

Rank::Rank(const RankOptions& o) {
  if (!kernels::mpi_launcher_variable().empty()) {
    kernels::MpiCommOptions mpi;
    mpi.channels = kExecutorChannels;
    mpi.timeout_s = o.comm_timeout_s;
    mpi.concurrent_threads = true;
    mpi.report_launcher_kill = true;
    comm_ = kernels::make_mpi_comm(mpi);
    if (comm_->size() != o.ranks) {
      throw InputError("--ranks", std::to_string(o.ranks) + " asked for, but mpirun started " +
                                      std::to_string(comm_->size()));
    }
  } else {
    comm_ = std::move(kernels::make_thread_comms(1, kExecutorChannels, o.comm_timeout_s).front());
  }
  if (o.cuda) {
    device_ = make_cuda_device(comm_.get(), o.comm_timeout_s);
  } else {
    CpuDeviceOptions dev;
    const int cpus = o.node_cpus > 0
                         ? o.node_cpus
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    dev.blas_threads = kernels::rank_threads(cpus, o.ranks_per_node, kernels::usable_cpus());
    device_ = make_cpu_device(comm_.get(), dev);
  }
}

Rank::~Rank() {
  device_.reset();
  comm_.reset();
}

}  // namespace zplan::executor
