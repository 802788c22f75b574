// What an interrupted calibration leaves behind: nothing.
//
// A calibration writes its profile only at the very end, atomically (base/atomic_file.h), so a
// run killed halfway never leaves a partial profile. The probes' temporary files (the NVMe probe's
// scratch files) are unlinked as soon as they are open, so even SIGKILL leaves none; for the short
// window between creating a file and unlinking it, its path is registered here and the handlers
// that InterruptGuard installs for SIGINT, SIGTERM and SIGHUP unlink every registered path, then
// let the signal kill the process as it would have (exit status 128 + signal).
#ifndef ZPLAN_CALIBRATE_INTERRUPT_H_
#define ZPLAN_CALIBRATE_INTERRUPT_H_

#include <functional>
#include <string>

namespace zplan::calibrate {

// Installs the handlers for its lifetime (and restores the previous ones). Not nestable.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// Registers `path` for removal by the handlers; returns its slot, or -1 when all slots are taken
// or the path is too long (then it is simply not protected). Paths stay registered until
// unregister_temp_path(slot).
int register_temp_path(const std::string& path);
void unregister_temp_path(int slot);

// Runs `fn` with SIGINT, SIGTERM and SIGHUP blocked: a signal that arrives meanwhile takes effect
// when `fn` has returned (or thrown), so `fn` (the final atomic write) completes or never starts.
void with_signals_blocked(const std::function<void()>& fn);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_INTERRUPT_H_
