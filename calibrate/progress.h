// Progress: what a calibration is doing, on stderr, from rank 0 only (tables go to stdout).
// One line per phase, with the wall time since the run began, so that a log shows where the time
// went and a parent process can tell how far a run got.
#ifndef ZPLAN_CALIBRATE_PROGRESS_H_
#define ZPLAN_CALIBRATE_PROGRESS_H_

#include <chrono>
#include <ostream>
#include <string>

namespace zplan::calibrate {

class Progress {
 public:
  // `out` = nullptr: quiet (every rank but 0, and tests).
  explicit Progress(std::ostream* out) : out_(out), start_(std::chrono::steady_clock::now()) {}

  // Prints "zplan calibrate [  1.2 s]: <what>".
  void note(const std::string& what);

  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::ostream* out_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_PROGRESS_H_
