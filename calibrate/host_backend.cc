#include "calibrate/host_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <thread>

#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/units.h"
#include "calibrate/block_io.h"
#include "kernels/cpu_adam.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_threads.h"

namespace zplan::calibrate {

namespace {

// Caches are flushed by writing a buffer of twice the last-level cache (bandwidthTest flushes with
// 256 MB, reference §7.2), at least 64 MiB, at most 1 GiB, split between a node's ranks.
constexpr double kMinFlushBytes = 64 * kMiB;
constexpr double kMaxFlushBytes = 1 * kGiB;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A 4096-byte-aligned buffer, written once so that every page is resident (pre-faulted), and
// optionally locked in memory: the CPU analogue of cudaHostAlloc'ed pinned memory.
class Buffer {
 public:
  Buffer(size_t bytes, bool lock) : bytes_(bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 4096)) != 0) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
    std::memset(data_, 1, bytes_);
    if (lock) {
      if (mlock(data_, bytes_) == 0) {
        locked_ = true;
      } else {
        lock_error_ = std::strerror(errno);
      }
    }
  }
  ~Buffer() {
    if (locked_) munlock(data_, bytes_);
    std::free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() { return data_; }
  float* floats() { return reinterpret_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  bool locked() const { return locked_; }
  const std::string& lock_error() const { return lock_error_; }

 private:
  size_t bytes_;
  char* data_ = nullptr;
  bool locked_ = false;
  std::string lock_error_;
};

class CacheFlusher {
 public:
  explicit CacheFlusher(double bytes) : buffer_(static_cast<size_t>(bytes), false) {}
  void flush() {
    if (buffer_.bytes() == 0) return;
    std::memset(buffer_.data(), ++value_, buffer_.bytes());
  }

 private:
  Buffer buffer_;
  int value_ = 0;
};

// Runs `fn` on every rank at once, `repeats` times, each time after `prepare` (untimed, before the
// barrier). Returns the mean over ranks of each rank's median time.
double time_all_ranks(kernels::Comm& g, int repeats, const std::function<void()>& prepare,
                      const std::function<void()>& fn) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    prepare();
    g.barrier();
    auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(seconds_since(t0));
  }
  return g.sum(median(times)) / g.size();
}

// Runs f(begin, end) over [0, n) split into `threads` contiguous parts, one thread each.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& f) {
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int t = 1; t < threads && t * per < n; ++t) {
    workers.emplace_back(f, t * per, std::min(n, (t + 1) * per));
  }
  f(0, std::min(n, per));
  for (std::thread& w : workers) w.join();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.pop_back();
  size_t i = s.find_first_not_of(" \t");
  return i == std::string::npos ? "" : s.substr(i);
}

class HostBackend : public Backend {
 public:
  std::string name() const override { return "host"; }

  void check(kernels::Comm&, const ProbeOptions& o) override {
    ScratchFile probe(o.nvme_path);  // throws, naming the directory, if nothing can be written
  }

  void measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
               Measurements* out) override;

 private:
  void copies(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher, HostMeasurements* h);
  void triad(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher, HostMeasurements* h);
  void adam(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher, HostMeasurements* h);
  void nvme(kernels::Comm& g, const ProbeOptions& o, const HostSizes& sz, HostMeasurements* h);
  void gemms(kernels::Comm& g, const HostSizes& sz, double cold_bytes, HostMeasurements* h);

  RateRow row(kernels::Comm& g, const std::string& probe, double size, int threads, double time_s) {
    RateRow r;
    r.probe = probe;
    r.size = size;
    r.threads = threads;
    r.time_s = time_s;
    r.rate = size / time_s;
    r.node_rate = r.rate * g.size() / g.nodes();
    return r;
  }
};

void HostBackend::copies(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher,
                         HostMeasurements* h) {
  const size_t bytes = static_cast<size_t>(sz.copy_bytes);
  Buffer device(bytes, false);
  double* rates[2][2] = {{&h->h2d_pageable_bytes_per_s, &h->d2h_pageable_bytes_per_s},
                         {&h->h2d_pinned_bytes_per_s, &h->d2h_pinned_bytes_per_s}};
  for (int pinned = 1; pinned >= 0; --pinned) {
    Buffer host(bytes, pinned == 1);
    if (pinned == 1) {
      h->pinned_note = host.locked() ? "mlock"
                                     : "mlock failed (" + host.lock_error() +
                                           "): pre-faulted pageable memory instead";
    }
    for (int d2h = 0; d2h < 2; ++d2h) {
      char* dst = d2h ? host.data() : device.data();
      const char* src = d2h ? device.data() : host.data();
      std::memcpy(dst, src, bytes);  // warm-up
      double t = time_all_ranks(
          g, sz.repeats, [&] { flusher.flush(); }, [&] { std::memcpy(dst, src, bytes); });
      *rates[pinned][d2h] = sz.copy_bytes / t;
      h->rates.push_back(
          row(g, std::string("copy ") + (d2h ? "d2h" : "h2d") + (pinned ? " pinned" : " pageable"),
              sz.copy_bytes, 1, t));
    }
  }
}

void HostBackend::triad(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher,
                        HostMeasurements* h) {
  const int64_t n = static_cast<int64_t>(sz.triad_bytes_per_array / sizeof(float));
  const size_t bytes = size_t(n) * sizeof(float);
  Buffer a(bytes, false), b(bytes, false), c(bytes, false);
  float* pa = a.floats();
  const float* pb = b.floats();
  const float* pc = c.floats();
  const float scalar = 3.0f;
  auto kernel = [&] {
    parallel_for(n, h->threads_per_rank, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pa[i] = pb[i] + scalar * pc[i];
    });
  };
  kernel();  // warm-up
  double t = time_all_ranks(
      g, sz.repeats, [&] { flusher.flush(); }, kernel);
  const double moved = 3.0 * double(bytes);  // STREAM counts: read b, c; write a
  h->triad_bytes_per_s_per_rank = moved / t;
  h->triad_bytes_per_s_node = g.sum(moved / t) / g.nodes();
  h->rates.push_back(row(g, "triad", moved, h->threads_per_rank, t));

  // The executor's memory-bound kernel (executor/device_cpu.cc, memory_pass): x = s x in
  // place over one triad array, the factor a local constant, counted as read + write (8 bytes
  // per element, which is also what the CPU moves).
  float* x = a.floats();
  volatile float unit = 1.0f;  // opaque to the compiler, so that x * 1 is not folded away
  auto inplace = [x, n, &unit, threads = h->threads_per_rank] {
    parallel_for(n, threads, [x, &unit](int64_t begin, int64_t end) {
      const float s = unit;
      for (int64_t i = begin; i < end; ++i) x[i] = x[i] * s;
    });
  };
  inplace();  // warm-up
  double ti = time_all_ranks(
      g, sz.repeats, [&] { flusher.flush(); }, inplace);
  const double moved_inplace = 2.0 * double(bytes);
  h->inplace_bytes_per_s_per_rank = moved_inplace / ti;
  h->inplace_bytes_per_s_node = g.sum(moved_inplace / ti) / g.nodes();
  h->rates.push_back(row(g, "scale in place", moved_inplace, h->threads_per_rank, ti));
}

void HostBackend::adam(kernels::Comm& g, const HostSizes& sz, CacheFlusher& flusher,
                       HostMeasurements* h) {
  h->adam_isa = kernels::isa_name(kernels::best_isa());
  kernels::AdamHyper hyper;
  hyper.weight_decay = 0.01f;
  for (double params : sz.adam_params) {
    const int64_t n = static_cast<int64_t>(params);
    const size_t bytes = size_t(n) * sizeof(float);
    Buffer p(bytes, false), grad(bytes, false), m(bytes, false), v(bytes, false);
    for (int64_t i = 0; i < n; ++i) {
      p.floats()[i] = 0.01f * float(i % 97);
      grad.floats()[i] = 1e-3f * float(i % 13) - 5e-3f;
      m.floats()[i] = 0;
      v.floats()[i] = 0;
    }
    int64_t step = 1;
    auto kernel = [&] {
      kernels::adam_step(hyper, step++, p.floats(), grad.floats(), m.floats(), v.floats(), n,
                         h->threads_per_rank);
    };
    kernel();  // warm-up
    double t = time_all_ranks(
        g, sz.repeats, [&] { flusher.flush(); }, kernel);
    h->rates.push_back(row(g, "adam", params, h->threads_per_rank, t));
    h->adam_params_per_s_per_rank = params / t;  // the largest size wins (sizes increase)
  }
}

void HostBackend::nvme(kernels::Comm& g, const ProbeOptions& o, const HostSizes& sz,
                       HostMeasurements* h) {
  kernels::BlockIoSettings settings;  // DeepSpeed's aio defaults
  ScratchFile file(o.nvme_path);
  h->nvme_path = o.nvme_path;
  h->nvme_o_direct = g.sum(file.o_direct() ? 1.0 : 0.0) == g.size();
  const size_t bytes = static_cast<size_t>(sz.nvme_bytes_per_rank);
  struct statvfs vfs;
  if (fstatvfs(file.fd(), &vfs) == 0) {
    h->nvme_capacity_bytes = double(vfs.f_bavail) * double(vfs.f_frsize);
  }
  // Node rate = the node's bytes over the slowest rank's time (all ranks start together).
  std::string engine;
  g.barrier();
  double write_s = g.max(sequential_write(file, bytes, settings, &engine));
  g.barrier();
  double read_s = g.max(sequential_read(file, bytes, settings, &engine));
  const double node_bytes = double(bytes) * g.size() / g.nodes();
  h->nvme_write_bytes_per_s_node = node_bytes / write_s;
  h->nvme_read_bytes_per_s_node = node_bytes / read_s;
  h->nvme_engine = engine;
  if (!file.o_direct()) h->nvme_engine += "; " + file.note();
  RateRow w = row(g, "nvme write", double(bytes), 1, write_s);
  w.node_rate = h->nvme_write_bytes_per_s_node;
  RateRow r = row(g, "nvme read", double(bytes), 1, read_s);
  r.node_rate = h->nvme_read_bytes_per_s_node;
  h->rates.push_back(w);
  h->rates.push_back(r);
}

void HostBackend::gemms(kernels::Comm& g, const HostSizes& sz, double cold_bytes,
                        HostMeasurements* h) {
  kernels::set_cpu_gemm_threads(h->threads_per_rank);
  h->gemm_library = kernels::cpu_gemm_library();
  {
    // The per-call cost: a 1x1x1 GEMM, many times.
    float a = 1, b = 1, c = 0;
    constexpr int kCalls = 2000;
    double t = time_all_ranks(
        g, sz.repeats, [] {},
        [&] {
          for (int i = 0; i < kCalls; ++i) {
            kernels::cpu_sgemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
          }
        });
    h->gemm_call_s = t / kCalls;
  }
  for (const GemmShape& s : sz.gemms) {
    // Operands as a training step sees them: each layer's weights and activations are other
    // memory than the previous call's, so the calls cycle through enough copies of A, B and C
    // to exceed the last-level cache (cold_bytes); timing one hot set would flatter the CPU by
    // ~10% at the executor's sizes.
    const size_t a_bytes = size_t(s.m * s.k) * 4, b_bytes = size_t(s.k * s.n) * 4,
                 c_bytes = size_t(s.m * s.n) * 4;
    const double set_bytes = double(a_bytes + b_bytes + c_bytes);
    const int sets = std::clamp(static_cast<int>(std::ceil(cold_bytes / set_bytes)) + 1, 1, 64);
    std::vector<std::unique_ptr<Buffer>> as, bs, cs;
    for (int i = 0; i < sets; ++i) {
      as.push_back(std::make_unique<Buffer>(a_bytes, false));
      bs.push_back(std::make_unique<Buffer>(b_bytes, false));
      cs.push_back(std::make_unique<Buffer>(c_bytes, false));
      for (int64_t j = 0; j < s.m * s.k; ++j) as.back()->floats()[j] = float(j % 7) * 0.1f;
      for (int64_t j = 0; j < s.k * s.n; ++j) bs.back()->floats()[j] = float(j % 5) * 0.1f;
    }
    // Row-major leading dimensions of A and B as stored (transposed or not).
    const int64_t lda = s.trans_a ? s.m : s.k;
    const int64_t ldb = s.trans_b ? s.k : s.n;
    int next = 0;
    auto call = [&] {
      const int i = next;
      next = (next + 1) % sets;
      kernels::cpu_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, as[i]->floats(), lda,
                         bs[i]->floats(), ldb, 0.0f, cs[i]->floats(), s.n);
    };
    auto t0 = std::chrono::steady_clock::now();
    call();  // warm-up, and the estimate that sets the calls per block (agreed by all ranks)
    double one = g.max(seconds_since(t0));
    int calls = std::clamp(static_cast<int>(std::ceil(sz.target_block_s / one)), sets, 1000);
    double t = time_all_ranks(
        g, sz.repeats, [] {},
        [&] {
          for (int i = 0; i < calls; ++i) call();
        });
    h->gemms.push_back(GemmRow::of("fp32", s, t / calls));
  }
}

void HostBackend::measure(kernels::Comm& g, const ProbeOptions& o, Progress& progress,
                          Measurements* out) {
  HostMeasurements& h = out->host;
  CpuInfo cpu = read_cpu_info();
  h.measured = true;
  h.cpu_model = cpu.model;
  h.cpu_vendor = cpu.vendor;
  h.memory_bytes = cpu.memory_bytes;
  h.ranks_per_node = g.local_size();
  h.threads_per_rank =
      threads_per_rank(o, cpu.online_cpus, g.local_size(), kernels::usable_cpus());
  // The node's CPUs as its ranks use them: all online CPUs, or fewer when the launcher bound each
  // rank to fewer than its share (Open MPI binds to one core per rank for up to 2 ranks), so
  // that the profile's per-rank threads (cpu_cores / ranks, sim/step_builder.cc) are the ones
  // measured here.
  h.cpu_cores = std::min(cpu.online_cpus, h.threads_per_rank * h.ranks_per_node);
  if (o.threads == 0 && h.cpu_cores < cpu.online_cpus) {
    progress.note("host: each rank may run on " + std::to_string(h.threads_per_rank) + " of the " +
                  std::to_string(cpu.online_cpus) +
                  " online CPUs (its affinity: mpirun binds up to 2 ranks to a core each); "
                  "measuring with that many threads and writing cpu_cores " +
                  std::to_string(h.cpu_cores) + " (mpirun --bind-to none gives each rank its share)");
  }
  const HostSizes sz = host_sizes(o.sweep);
  double flush = 0;
  if (o.sweep != Sweep::kTiny) {
    flush = std::clamp(2 * cpu.l3_bytes, kMinFlushBytes, kMaxFlushBytes) / g.local_size();
  }
  CacheFlusher flusher(flush);

  char line[200];
  copies(g, sz, flusher, &h);
  std::snprintf(line, sizeof line, "host: copies %.1f / %.1f GB/s per rank (pinned / pageable h2d)",
                h.h2d_pinned_bytes_per_s / 1e9, h.h2d_pageable_bytes_per_s / 1e9);
  progress.note(line);
  triad(g, sz, flusher, &h);
  std::snprintf(line, sizeof line,
                "host: memory %.1f GB/s per rank in place, %.1f GB/s triad (STREAM counting)",
                h.inplace_bytes_per_s_per_rank / 1e9, h.triad_bytes_per_s_per_rank / 1e9);
  progress.note(line);
  adam(g, sz, flusher, &h);
  std::snprintf(line, sizeof line, "host: adam (%s, %d thread%s) %.0f Mparams/s per rank",
                h.adam_isa.c_str(), h.threads_per_rank, h.threads_per_rank == 1 ? "" : "s",
                h.adam_params_per_s_per_rank / 1e6);
  progress.note(line);
  nvme(g, o, sz, &h);
  std::snprintf(line, sizeof line, "host: nvme write %.2f, read %.2f GB/s per node (%s)",
                h.nvme_write_bytes_per_s_node / 1e9, h.nvme_read_bytes_per_s_node / 1e9,
                h.nvme_engine.c_str());
  progress.note(line);
  gemms(g, sz, flush, &h);
  double best = 0;
  for (const GemmRow& r : h.gemms) best = std::max(best, r.flops_per_s());
  std::snprintf(line, sizeof line, "host: sgemm %zu shapes, best %.1f GFLOP/s per rank",
                h.gemms.size(), best / 1e9);
  progress.note(line);

  out->versions["blas"] = h.gemm_library;
  struct utsname u;
  if (uname(&u) == 0) out->versions["kernel"] = std::string(u.sysname) + " " + u.release;
  if (!h.pinned_note.empty() && h.pinned_note != "mlock") out->notes.push_back(h.pinned_note);
  if (!h.nvme_o_direct) out->notes.push_back("nvme: " + h.nvme_engine);
}

}  // namespace

CpuInfo read_cpu_info() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    std::string value = trim(line.substr(colon + 1));
    if (key == "model name" && info.model.empty()) info.model = value;
    if (key == "vendor_id") {
      if (value == "GenuineIntel") info.vendor = hardware::CpuVendor::kIntel;
      if (value == "AuthenticAMD") info.vendor = hardware::CpuVendor::kAmd;
    }
  }
  if (info.model.empty()) info.model = "unknown CPU";
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  info.online_cpus = cpus > 0 ? static_cast<int>(cpus) : 1;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) info.memory_bytes = double(pages) * double(page);
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) info.l3_bytes = double(l3);
#endif
  return info;
}

HostSizes host_sizes(Sweep sweep) {
  HostSizes s;
  switch (sweep) {
    case Sweep::kTiny:
      s.copy_bytes = 1 * kMiB;
      s.triad_bytes_per_array = 1 * kMiB;
      s.adam_params = {65536};
      s.nvme_bytes_per_rank = 4 * kMiB;
      s.layers = {{16, 64, 64}};
      s.repeats = 1;
      s.target_block_s = 0.001;
      break;
    case Sweep::kQuick:
      s.copy_bytes = 64 * kMiB;
      s.triad_bytes_per_array = 64 * kMiB;
      s.adam_params = {1 << 20, 4 << 20, 16 << 20};
      s.nvme_bytes_per_rank = 256 * kMiB;
      // Linear layers of the executor's MLPs (h -> h, h 256 and 1024) and of transformer blocks
      // (h -> 2h, h -> 4h... at h 512, 1024) at the token counts of small micro-batches; the
      // three GEMMs of a layer have equal FLOPs, so the layers are chosen for FLOPs from 2e6 to
      // 1e9 (seven points of the efficiency curve).
      s.layers = {{16, 256, 256},    {64, 256, 256},    {32, 512, 1024},  {32, 1024, 1024},
                  {128, 1024, 1024}, {128, 1024, 2048}, {512, 1024, 1024}};
      break;
    case Sweep::kFull:
      s.copy_bytes = 256 * kMiB;
      s.triad_bytes_per_array = 256 * kMiB;
      s.adam_params = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
      s.nvme_bytes_per_rank = 1 * kGiB;
      s.layers = {{32, 1024, 1024},  {128, 1024, 1024}, {512, 1024, 1024}, {2048, 1024, 1024},
                  {128, 256, 256},   {512, 256, 256},   {2048, 256, 256},  {128, 2048, 2048},
                  {512, 2048, 2048}, {128, 1024, 4096}, {512, 1024, 4096}, {512, 4096, 1024},
                  {2048, 2048, 8192}};
      s.repeats = 5;
      s.target_block_s = 0.05;
      break;
  }
  for (const auto& [tokens, in, out] : s.layers) {
    for (const GemmShape& g : linear_layer_gemms(tokens, in, out)) s.gemms.push_back(g);
  }
  return s;
}

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace zplan::calibrate
