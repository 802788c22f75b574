// `zplan calibrate`: measure this machine (or cluster, under mpirun) and write a hardware profile
// fitted to it (docs/calibration.md). Tables go to stdout and progress to stderr, from rank 0
// only; the profile is written by rank 0, atomically, after everything is measured.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "calibrate/calibrate.h"
#include "calibrate/interrupt.h"
#include "calibrate/registry.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "hardware/profile.h"
#include "base/atomic_file.h"
#include "base/input_error.h"

namespace zplan::cli {

namespace {

struct CalibrateCliOptions {
  calibrate::CalibrateOptions run;
  std::string sweep = "quick";
  bool force = false;
  bool json = false;
  bool list = false;
  double fake_delay_ms = 0;
};

calibrate::Sweep parse_sweep(const std::string& text) {
  const std::string t = ascii_lower(text);
  if (t == "quick") return calibrate::Sweep::kQuick;
  if (t == "full") return calibrate::Sweep::kFull;
  if (t == "tiny") return calibrate::Sweep::kTiny;
  throw InputError("--sweep", "must be quick or full, got '" + text + "'");
}

int list_backends() {
  std::cout << "# backend  compiled  measures\n";
  for (const calibrate::BackendInfo& b : calibrate::known_backends()) {
    std::cout << "  " << b.name << std::string(9 - std::min<size_t>(8, b.name.size()), ' ')
              << (b.compiled ? "yes       " : "no        ") << b.measures
              << (b.compiled ? "" : " (configure with " + b.configure_hint + ")") << '\n';
  }
  return kExitOk;
}

// This process's rank when an MPI launcher started it (Open MPI, PMIx, MPICH), else 0.
int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

int calibrate_on_this_rank(CalibrateCliOptions o);

int run_calibrate(CalibrateCliOptions o) {
  try {
    return calibrate_on_this_rank(std::move(o));
  } catch (const InputError&) {
    // Under mpirun every rank checks the same options: one line, from rank 0, is enough.
    if (launcher_rank() > 0) return kExitBadInput;
    throw;
  }
}

int calibrate_on_this_rank(CalibrateCliOptions o) {
  if (o.list) return list_backends();
  o.run.probe.sweep = parse_sweep(o.sweep);
  if (o.run.probe.threads < 0) throw InputError("--threads", "must be at least 1");
  if (o.fake_delay_ms < 0) throw InputError("--fake-delay-ms", "must not be negative");
  o.run.probe.fake_delay_s = o.fake_delay_ms / 1000;
  // Refuse to measure for minutes only to find the output cannot be written.
  if (!o.run.out.empty()) check_output_file(o.run.out, o.force);
  check_output_not_input("--out", o.run.out, {{"--base", o.run.base}});
  std::unique_ptr<kernels::Comm> group = calibrate::make_process_comm();
  calibrate::InterruptGuard guard;  // temporary files go away on SIGINT / SIGTERM / SIGHUP
  calibrate::Progress progress(group->rank() == 0 ? &std::cerr : nullptr);
  calibrate::Calibration c = calibrate::calibrate(o.run, *group, progress);
  if (group->rank() == 0) {
    if (o.json) {
      std::cout << calibrate::report_json(c).dump(2) << '\n';
    } else {
      calibrate::print_report(std::cout, c);
    }
    if (!o.run.out.empty()) {
      const std::string text = hardware::profile_to_json(c.built->profile).dump(2) + "\n";
      calibrate::with_signals_blocked([&] { write_file_atomically(o.run.out, text, o.force); });
      progress.note("wrote " + o.run.out);
    }
  }
  return kExitOk;
}

}  // namespace

void setup_calibrate_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<CalibrateCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "measure this machine (under mpirun: the cluster) and write a hardware profile fitted to "
      "it");
  sub->add_option("--backend", o->run.backends,
                  "what to measure: a comma list of host, mpi, cuda, nccl, fake, or auto (host; "
                  "plus cuda and nccl with a GPU, else mpi under mpirun)")
      ->capture_default_str();
  sub->add_option("--out", o->run.out,
                  "write the calibrated profile here (JSON; atomically, once everything is "
                  "measured)");
  sub->add_flag("--force", o->force, "replace an existing --out file");
  sub->add_option("--base", o->run.base,
                  "profile for what is not measured: a stock name (a100, h100, ...) or a file "
                  "(default: built from the measurements; a GPU's stock profile with cuda)");
  sub->add_option("--name", o->run.name, "the profile's name (default: --out's file name)");
  sub->add_option("--sweep", o->sweep,
                  "quick (CPU-only calibration in well under a minute) or full (nccl-tests-like "
                  "-b 8 -e 8G -f 2 for collectives, larger host probes)")
      ->capture_default_str();
  sub->add_option("--nvme-path", o->run.probe.nvme_path,
                  "directory for the NVMe probe's scratch files (removed as soon as opened)")
      ->capture_default_str();
  sub->add_option("--threads", o->run.probe.threads,
                  "threads per rank for sgemm, Adam and the memory kernel (default: the node's "
                  "CPUs / its ranks)");
  sub->add_option("--min-bytes", o->run.probe.min_bytes,
                  "smallest collective size S (nccl-tests -b; default 8)");
  sub->add_option("--max-bytes", o->run.probe.max_bytes,
                  "largest collective size S (nccl-tests -e; default 64 MiB quick, 1 GiB full on "
                  "CPUs, 8 GiB full on GPUs)");
  sub->add_option("--step-factor", o->run.probe.step_factor,
                  "size multiplication factor (nccl-tests -f; default 2)");
  sub->add_flag("--json", o->json, "print measurements, fits and the profile as JSON");
  sub->add_flag("--list-backends", o->list, "list the backends this zplan knows and has");
  // For tests of interruption: the fake backend sleeps this long per measured size.
  sub->add_option("--fake-delay-ms", o->fake_delay_ms)->group("");
  sub->callback([o, action] { *action = [o] { return run_calibrate(*o); }; });
}

}  // namespace zplan::cli
