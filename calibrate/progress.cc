#include "calibrate/progress.h"

#include <cstdio>

namespace zplan::calibrate {

void Progress::note(const std::string& what) {
  if (out_ == nullptr) return;
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%6.1f s]", elapsed_s());
  *out_ << "zplan calibrate " << stamp << ": " << what << '\n';
  out_->flush();
}

}  // namespace zplan::calibrate
