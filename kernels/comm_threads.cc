// The thread fake of Comm, what every Comm shares, and the MPI and NCCL entry points of a build
// without them.
#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "kernels/check.h"
#include "kernels/comm_nccl.h"
#include "kernels/comm.h"
#include "kernels/config.h"

namespace zplan::kernels {

namespace {

// The meeting point of one channel: ranks post a pointer, wait for each other, read each other's
// buffers, and wait again before anyone may touch its buffer.
class Rendezvous {
 public:
  Rendezvous(int ranks, double timeout_s)
      : ranks_(ranks), timeout_(std::chrono::duration<double>(timeout_s)), posted_(ranks) {}

  void post(int rank, const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    posted_[rank] = p;
  }
  const void* posted(int rank) const { return posted_[rank]; }

  void wait_all(const char* what) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || broken_; }) || broken_) {
      broken_ = true;
      cv_.notify_all();
      throw InputError("executor", std::string("a rank did not join the ") + what +
                                       " in time (another rank failed?)");
    }
  }

 private:
  const int ranks_;
  const std::chrono::duration<double> timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::vector<const void*> posted_;
};

struct Shared {
  Shared(int ranks, int channel_count, double timeout) : timeout_s(timeout) {
    for (int c = 0; c < channel_count; ++c) {
      channels.push_back(std::make_unique<Rendezvous>(ranks, timeout));
    }
  }
  std::vector<std::unique_ptr<Rendezvous>> channels;
  double timeout_s;
  // The groups split() made: (split number, color) -> the group's meeting points, made by the
  // first of its ranks to get there.
  std::mutex split_mu;
  std::map<std::pair<int, int>, std::shared_ptr<Shared>> splits;
};

class ThreadComm : public Comm {
 public:
  ThreadComm(std::shared_ptr<Shared> shared, int rank, int ranks)
      : shared_(std::move(shared)), rank_(rank), ranks_(ranks), hosts_{host_name()} {}

  int rank() const override { return rank_; }
  int size() const override { return ranks_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return ranks_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string library() const override { return ""; }
  int channels() const override { return static_cast<int>(shared_->channels.size()); }
  std::string name() const override { return "threads"; }

  void all_reduce(int channel, float* data, size_t count) override {
    Rendezvous& r = at(channel);
    r.post(rank_, data);
    r.wait_all("all_reduce");
    std::vector<float> sum = sum_posted(r, 0, count);
    r.wait_all("all_reduce");
    std::memcpy(data, sum.data(), count * sizeof(float));
  }

  void all_gather(int channel, const float* send, size_t count, float* recv) override {
    Rendezvous& r = at(channel);
    r.post(rank_, send);
    r.wait_all("all_gather");
    for (int k = 0; k < ranks_; ++k) {
      const float* x = static_cast<const float*>(r.posted(k));
      float* dst = recv + static_cast<size_t>(k) * count;
      if (x != dst) std::memcpy(dst, x, count * sizeof(float));
    }
    r.wait_all("all_gather");
  }

  void reduce_scatter(int channel, float* data, size_t count) override {
    Rendezvous& r = at(channel);
    r.post(rank_, data);
    r.wait_all("reduce_scatter");
    std::vector<float> sum = sum_posted(r, static_cast<size_t>(rank_) * count, count);
    r.wait_all("reduce_scatter");
    std::memcpy(data, sum.data(), count * sizeof(float));
  }

  void barrier(int channel) override { at(channel).wait_all("barrier"); }

  void max(int channel, std::vector<double>* values) override { combine(channel, values, true); }
  void sum(int channel, std::vector<double>* values) override { combine(channel, values, false); }

  std::vector<double> gather_all(int channel, const std::vector<double>& values) override {
    Rendezvous& r = at(channel);
    r.post(rank_, &values);
    r.wait_all("gather");
    std::vector<double> out;
    for (int k = 0; k < ranks_; ++k) {
      const auto* v = static_cast<const std::vector<double>*>(r.posted(k));
      out.insert(out.end(), v->begin(), v->end());
    }
    r.wait_all("gather");
    return out;
  }

  void broadcast(int channel, void* data, size_t bytes, int root) override {
    Rendezvous& r = at(channel);
    r.post(rank_, data);
    r.wait_all("broadcast");
    if (rank_ != root) std::memcpy(data, r.posted(root), bytes);
    r.wait_all("broadcast");
  }

  [[noreturn]] void abort(const std::string& message) override {
    throw InputError("executor", message);
  }

  std::unique_ptr<Comm> split(int color) override {
    // Every rank posts its color on channel 0; the ranks of one color find the same group.
    Rendezvous& r = at(0);
    r.post(rank_, &color);
    r.wait_all("split");
    int group_rank = 0, group_size = 0;
    for (int k = 0; k < ranks_; ++k) {
      if (*static_cast<const int*>(r.posted(k)) != color) continue;
      if (k < rank_) ++group_rank;
      ++group_size;
    }
    std::shared_ptr<Shared> group;
    {
      std::lock_guard<std::mutex> lock(shared_->split_mu);
      std::shared_ptr<Shared>& slot = shared_->splits[{splits_, color}];
      if (!slot) slot = std::make_shared<Shared>(group_size, channels(), shared_->timeout_s);
      group = slot;
    }
    ++splits_;
    r.wait_all("split");
    return std::make_unique<ThreadComm>(std::move(group), group_rank, group_size);
  }

 private:
  Rendezvous& at(int channel) { return *shared_->channels.at(static_cast<size_t>(channel)); }

  // The sum over ranks, in rank order, of `count` floats at `offset` of what each rank posted.
  std::vector<float> sum_posted(Rendezvous& r, size_t offset, size_t count) const {
    std::vector<float> sum(count, 0.0f);
    for (int k = 0; k < ranks_; ++k) {
      const float* x = static_cast<const float*>(r.posted(k)) + offset;
      for (size_t i = 0; i < count; ++i) sum[i] += x[i];
    }
    return sum;
  }

  void combine(int channel, std::vector<double>* values, bool take_max) {
    Rendezvous& r = at(channel);
    r.post(rank_, values);
    r.wait_all("reduction");
    std::vector<double> out = *static_cast<const std::vector<double>*>(r.posted(0));
    for (int k = 1; k < ranks_; ++k) {
      const auto* v = static_cast<const std::vector<double>*>(r.posted(k));
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = take_max ? std::max(out[i], (*v)[i]) : out[i] + (*v)[i];
      }
    }
    r.wait_all("reduction");
    *values = std::move(out);
  }

  std::shared_ptr<Shared> shared_;
  int rank_;
  int ranks_;
  int splits_ = 0;  // split() calls so far (the same on every rank)
  std::vector<std::string> hosts_;
};

}  // namespace

double Comm::sum(double v) {
  std::vector<double> x{v};
  sum(0, &x);
  return x[0];
}

double Comm::max(double v) {
  std::vector<double> x{v};
  max(0, &x);
  return x[0];
}

std::vector<std::unique_ptr<Comm>> make_thread_comms(int ranks, int channels, double timeout_s) {
  auto shared = std::make_shared<Shared>(ranks, channels, timeout_s);
  std::vector<std::unique_ptr<Comm>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadComm>(shared, r, ranks));
  return out;
}

std::unique_ptr<Comm> make_single_process_comm() {
  return std::move(make_thread_comms(1, 1).front());
}

std::string mpi_launcher_variable() {
  // Set for every rank by: Open MPI's mpirun, MPICH/Hydra (PMI), MVAPICH, PMIx launchers. (Not
  // SLURM_NTASKS: a batch script has it without any launcher.)
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') return std::string(name) + "=" + v;
  }
  return "";
}

int mpi_launcher_rank() {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(v, &end, 10);
    if (*end == '\0' && rank >= 0 && rank <= INT_MAX) return static_cast<int>(rank);
  }
  return -1;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

#if !ZPLAN_HAVE_NCCL
std::unique_ptr<Comm> make_nccl_comm(Comm*, int, int, double) {
  throw_unavailable("cuda", "more than one rank needs NCCL, and this zplan was built without it");
}
bool comm_has_nccl() { return false; }
#endif

#if !ZPLAN_HAVE_MPI
std::unique_ptr<Comm> make_mpi_comm(const MpiCommOptions&) {
  throw_unavailable("mpi", "this zplan was built without MPI (configure with -DZPLAN_WITH_MPI=ON)");
}
bool comm_has_mpi() { return false; }
#endif

}  // namespace zplan::kernels
