// ExecutorComm over MPI (built with ZPLAN_HAVE_MPI): one MPI_Comm_dup of MPI_COMM_WORLD per
// channel, blocking collectives (the ones `zplan calibrate --backend mpi` times), errors returned
// and thrown by ZPLAN_MPI_CHECK, and a watchdog thread for ranks that stop answering.
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "kernels/check.h"
#include "kernels/comm.h"

namespace zplan::kernels {

namespace {

using Clock = std::chrono::steady_clock;

int world_rank_for_signal = -1;

// mpirun sends SIGTERM to the surviving ranks when one of them exits abnormally: say so in one
// line (async-signal-safe: write and _exit only) instead of dying silently.
extern "C" void on_terminate(int) {
  char msg[160];
  int n = std::snprintf(msg, sizeof msg,
                        "zplan: rank %d: stopped by the MPI launcher (another rank failed)\n",
                        world_rank_for_signal);
  if (n > 0) {
    ssize_t ignored = write(STDERR_FILENO, msg, static_cast<size_t>(n));
    (void)ignored;
  }
  _exit(1);
}

int checked_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) {
    throw InputError("executor", "a collective of " + std::to_string(count) +
                                     " elements is larger than MPI's int count");
  }
  return static_cast<int>(count);
}

class MpiComm : public ExecutorComm {
 public:
  MpiComm(int channels, double timeout_s) : timeout_s_(timeout_s), busy_since_(channels) {
    ZPLAN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    ZPLAN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    for (int c = 0; c < channels; ++c) {
      MPI_Comm comm;
      ZPLAN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
      ZPLAN_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
      comms_.push_back(comm);
    }
    for (auto& b : busy_since_) b.store(0);
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    library_ = v.substr(0, v.find_first_of(",\n"));
    world_rank_for_signal = rank_;
    std::signal(SIGTERM, on_terminate);
    watchdog_ = std::thread([this] {
      // Under a real-time policy the watchdog must outrank a thread spinning in MPI on its core.
      int policy = 0;
      sched_param param{};
      if (pthread_getschedparam(pthread_self(), &policy, &param) == 0 &&
          (policy == SCHED_FIFO || policy == SCHED_RR)) {
        param.sched_priority = std::min(param.sched_priority + 2, sched_get_priority_max(policy));
        pthread_setschedparam(pthread_self(), policy, &param);
      }
      watch();
    });
  }

  ~MpiComm() override {
    stop_.store(true);
    watchdog_.join();
    for (MPI_Comm& c : comms_) MPI_Comm_free(&c);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int channels() const override { return static_cast<int>(comms_.size()); }
  std::string name() const override { return "mpi (" + library_ + ")"; }

  void all_reduce(int channel, float* data, size_t count) override {
    Busy busy(this, channel, "all_reduce");
    ZPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, MPI_SUM,
                                  comm(channel)));
  }

  void all_gather(int channel, const float* send, size_t count, float* recv) override {
    Busy busy(this, channel, "all_gather");
    const bool in_place = send == recv + static_cast<size_t>(rank_) * count;
    ZPLAN_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, checked_count(count), MPI_FLOAT,
                                  recv, checked_count(count), MPI_FLOAT, comm(channel)));
  }

  void reduce_scatter(int channel, float* data, size_t count) override {
    Busy busy(this, channel, "reduce_scatter");
    ZPLAN_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT,
                                             MPI_SUM, comm(channel)));
  }

  void barrier(int channel) override {
    Busy busy(this, channel, "barrier");
    ZPLAN_MPI_CHECK(MPI_Barrier(comm(channel)));
  }

  void max(int channel, std::vector<double>* values) override {
    Busy busy(this, channel, "max");
    ZPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values->data(), checked_count(values->size()),
                                  MPI_DOUBLE, MPI_MAX, comm(channel)));
  }

  void sum(int channel, std::vector<double>* values) override {
    Busy busy(this, channel, "sum");
    ZPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values->data(), checked_count(values->size()),
                                  MPI_DOUBLE, MPI_SUM, comm(channel)));
  }

  std::vector<double> gather_all(int channel, const std::vector<double>& values) override {
    Busy busy(this, channel, "gather");
    std::vector<double> out(values.size() * static_cast<size_t>(size_));
    ZPLAN_MPI_CHECK(MPI_Allgather(values.data(), checked_count(values.size()), MPI_DOUBLE,
                                  out.data(), checked_count(values.size()), MPI_DOUBLE,
                                  comm(channel)));
    return out;
  }

  [[noreturn]] void abort(const std::string& message) override {
    std::fprintf(stderr, "zplan: rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
  }

 private:
  // Marks a channel busy for the watchdog while a call is in flight.
  struct Busy {
    Busy(MpiComm* c, int channel, const char* what) : comm(c), ch(channel) {
      comm->what_[static_cast<size_t>(ch) % kMaxChannels].store(what);
      comm->busy_since_[static_cast<size_t>(ch)].store(
          Clock::now().time_since_epoch().count());
    }
    ~Busy() { comm->busy_since_[static_cast<size_t>(ch)].store(0); }
    MpiComm* comm;
    int ch;
  };

  MPI_Comm comm(int channel) const { return comms_.at(static_cast<size_t>(channel)); }

  void watch() {
    const auto limit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(timeout_s_));
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto now = Clock::now().time_since_epoch().count();
      for (size_t c = 0; c < busy_since_.size(); ++c) {
        const auto since = busy_since_[c].load();
        if (since != 0 && now - since > limit.count()) {
          char msg[256];
          std::snprintf(msg, sizeof msg,
                        "%s on channel %zu made no progress for %.0f s (did another rank fail?); "
                        "aborting the job",
                        what_[c % kMaxChannels].load(), c, timeout_s_);
          abort(msg);
        }
      }
    }
  }

  static constexpr size_t kMaxChannels = 16;
  int rank_ = 0;
  int size_ = 1;
  std::string library_;
  double timeout_s_;
  std::vector<MPI_Comm> comms_;
  std::vector<std::atomic<int64_t>> busy_since_;
  std::array<std::atomic<const char*>, kMaxChannels> what_{};
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<ExecutorComm> make_mpi_comm(int channels, double timeout_s) {
  return std::make_unique<MpiComm>(channels, timeout_s);
}

bool executor_has_mpi() { return true; }

bool mpi_init_for_executor(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    ZPLAN_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw_unavailable("mpi", "the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                             "executor's concurrent streams need");
  }
  return true;
}

void mpi_finalize_for_executor() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace zplan::kernels
