// Comm over MPI (built with ZPLAN_HAVE_MPI): MPI initialized here and nowhere else, one
// MPI_Comm_dup of MPI_COMM_WORLD per channel, blocking collectives (the ones `zplan calibrate
// --backend mpi` times), errors returned and thrown by ZPLAN_MPI_CHECK, and, when asked for, a
// watchdog thread for ranks that stop answering.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <mpi.h>
#include <pthread.h>
#include <sched.h>

#include "kernels/check.h"
#include "kernels/comm.h"

namespace zplan::kernels {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHostNameBytes = 256;

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

class MpiComm : public Comm {
 public:
  explicit MpiComm(const MpiCommOptions& o)
      : timeout_s_(o.timeout_s), busy_since_(static_cast<size_t>(o.channels)) {
    int initialized = 0;
    ZPLAN_MPI_CHECK(MPI_Initialized(&initialized));
    int provided = 0;
    if (initialized) {
      ZPLAN_MPI_CHECK(MPI_Query_thread(&provided));
    } else {
      // The thread level the executor needs, asked for by calibration too, so that MPI behaves
      // the same in both.
      ZPLAN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      owns_mpi_ = true;
    }
    if (o.concurrent_threads && provided < MPI_THREAD_MULTIPLE) {
      throw_unavailable("mpi",
                        "the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                        "executor's concurrent streams need");
    }
    // Errors come back as codes that ZPLAN_MPI_CHECK turns into exceptions (also for the mpi
    // calibration backend's collectives on MPI_COMM_WORLD).
    ZPLAN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    join(MPI_COMM_WORLD, o.channels);
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    ZPLAN_MPI_CHECK(MPI_Get_library_version(version, &len));
    library_ = std::string(version, static_cast<size_t>(len));
    while (!library_.empty() && (library_.back() == '\n' || library_.back() == '\0')) {
      library_.pop_back();
    }
    short_library_ = library_.substr(0, library_.find_first_of(",\n"));

    world_rank_for_signal = rank_;
    if (o.report_launcher_kill) std::signal(SIGTERM, on_terminate);
    start_watchdog();
  }

  // The group of `parent`'s ranks with `color` (Comm::split).
  MpiComm(const MpiComm& parent, int color)
      : library_(parent.library_),
        short_library_(parent.short_library_),
        timeout_s_(parent.timeout_s_),
        busy_since_(parent.comms_.size()) {
    MPI_Comm base;
    ZPLAN_MPI_CHECK(MPI_Comm_split(parent.comms_.at(0), color, parent.rank_, &base));
    join(base, static_cast<int>(parent.comms_.size()));
    ZPLAN_MPI_CHECK(MPI_Comm_free(&base));
    start_watchdog();
  }

  std::unique_ptr<Comm> split(int color) override {
    return std::make_unique<MpiComm>(*this, color);
  }

  ~MpiComm() override {
    stop_.store(true);
    if (watchdog_.joinable()) watchdog_.join();
    if (std::uncaught_exceptions() > 0) return;  // see make_mpi_comm in comm.h
    for (MPI_Comm& c : comms_) MPI_Comm_free(&c);
    MPI_Comm_free(&local_);
    if (owns_mpi_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string library() const override { return library_; }
  int channels() const override { return static_cast<int>(comms_.size()); }
  std::string name() const override { return "mpi (" + short_library_ + ")"; }

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

  void broadcast(int channel, void* data, size_t bytes, int root) override {
    Busy busy(this, channel, "broadcast");
    ZPLAN_MPI_CHECK(MPI_Bcast(data, checked_count(bytes), MPI_BYTE, root, comm(channel)));
  }

  [[noreturn]] void abort(const std::string& message) override {
    std::fprintf(stderr, "zplan: rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
  }

 private:
  // Takes `base`'s rank and size, its ranks on this node, one duplicate of it per channel and
  // the host names of its ranks.
  void join(MPI_Comm base, int channels) {
    ZPLAN_MPI_CHECK(MPI_Comm_rank(base, &rank_));
    ZPLAN_MPI_CHECK(MPI_Comm_size(base, &size_));
    ZPLAN_MPI_CHECK(
        MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_));
    ZPLAN_MPI_CHECK(MPI_Comm_rank(local_, &local_rank_));
    ZPLAN_MPI_CHECK(MPI_Comm_size(local_, &local_size_));
    for (int c = 0; c < channels; ++c) {
      MPI_Comm comm;
      ZPLAN_MPI_CHECK(MPI_Comm_dup(base, &comm));
      ZPLAN_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
      comms_.push_back(comm);
    }
    for (auto& b : busy_since_) b.store(0);
    std::vector<char> mine(kHostNameBytes, '\0');
    std::string me = host_name().substr(0, kHostNameBytes - 1);
    std::copy(me.begin(), me.end(), mine.begin());
    std::vector<char> all(size_t(kHostNameBytes) * size_, '\0');
    ZPLAN_MPI_CHECK(MPI_Allgather(mine.data(), kHostNameBytes, MPI_CHAR, all.data(), kHostNameBytes,
                                  MPI_CHAR, base));
    for (int r = 0; r < size_; ++r) {
      std::string h(all.data() + size_t(r) * kHostNameBytes);
      if (std::find(hosts_.begin(), hosts_.end(), h) == hosts_.end()) hosts_.push_back(h);
    }
  }

  // With a timeout, a thread that aborts the job when a collective on this Comm stalls (each
  // group watches its own channels).
  void start_watchdog() {
    if (timeout_s_ > 0) {
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
  }

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
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<std::string> hosts_;
  std::string library_;        // the whole version string
  std::string short_library_;  // up to its first comma: "Open MPI v4.1.4"
  double timeout_s_;
  std::vector<MPI_Comm> comms_;
  std::vector<std::atomic<int64_t>> busy_since_;
  std::array<std::atomic<const char*>, kMaxChannels> what_{};
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(const MpiCommOptions& options) {
  return std::make_unique<MpiComm>(options);
}

bool comm_has_mpi() { return true; }

}  // namespace zplan::kernels
