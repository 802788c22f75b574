// `zplan calibrate` as a library call: choose the backends, measure on every rank, fit, and build
// a hardware profile with provenance (docs/calibration.md). Writing the profile is the caller's
// job (cli/cmd_calibrate.cc writes it atomically from rank 0, after everything is measured).
#ifndef ZPLAN_CALIBRATE_CALIBRATE_H_
#define ZPLAN_CALIBRATE_CALIBRATE_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/backend.h"
#include "calibrate/measurements.h"
#include "calibrate/profile_builder.h"
#include "calibrate/progress.h"
#include "kernels/comm.h"

namespace zplan::calibrate {

struct CalibrateOptions {
  std::string backends = "auto";  // --backend: a comma list, or "auto" (registry.h)
  ProbeOptions probe;
  std::string base;          // --base: stock profile name or file; "" = built from measurements
  std::string name;          // the profile's name; "" = --out's file name without ".json"
  std::string out;           // --out (only for the default name)
  std::string command_line;  // for provenance
  std::string date;          // ISO 8601 UTC; "" = now (tests fix it)
};

struct Calibration {
  std::vector<std::string> backends;  // as run
  Measurements measurements;          // complete on rank 0
  std::optional<BuildResult> built;   // rank 0 only
  nlohmann::json provenance;
};

// Collective over `group`. Bad options, a bad --base and unavailable backends throw InputError
// before anything is measured; "fake" cannot be combined with other backends.
Calibration calibrate(const CalibrateOptions& options, kernels::Comm& group, Progress& progress);

// The measured tables, nccl-tests style (header lines start with '#'), and the fits.
void print_report(std::ostream& out, const Calibration& c);

// Everything as JSON: provenance, measurements, fits and the profile.
nlohmann::json report_json(const Calibration& c);

// Now as ISO 8601 UTC ("2026-11-22T01:54:25Z").
std::string utc_now();

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_CALIBRATE_H_
