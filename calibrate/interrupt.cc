#include "calibrate/interrupt.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <unistd.h>

#include <signal.h>

namespace zplan::calibrate {

namespace {

// Signal handlers may only touch lock-free atomics and static storage (POSIX
// async-signal-safety), hence fixed arrays instead of a std::vector.
constexpr int kSlots = 16;
constexpr size_t kMaxPath = 4096;
char g_paths[kSlots][kMaxPath];
std::atomic<bool> g_used[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

extern "C" void on_signal(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) unlink(g_paths[i]);  // unlink is async-signal-safe
  }
  // Die of the same signal, so the parent sees what happened (status 128 + sig).
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
}

sigset_t interrupt_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kSignals) sigaddset(&set, s);
  return set;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_mask = interrupt_set();  // one handler at a time
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

InterruptGuard::~InterruptGuard() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int register_temp_path(const std::string& path) {
  if (path.size() + 1 > kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_used[i].store(true);  // after the path is complete: the handler may read it from now on
    return i;
  }
  return -1;
}

void unregister_temp_path(int slot) {
  if (slot >= 0 && slot < kSlots) g_used[slot].store(false);
}

void with_signals_blocked(const std::function<void()>& fn) {
  sigset_t set = interrupt_set();
  sigset_t old;
  sigprocmask(SIG_BLOCK, &set, &old);
  try {
    fn();
  } catch (...) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace zplan::calibrate
