// `zplan validate`: simulate one step, execute the same step for real on --ranks ranks (MPI
// processes on the CPU, one rank per "device"), and print predicted vs measured step time, time
// per phase and peak memory per tier, with the error in percent. --max-error PCT turns it into a
// check (exit 4). Run from a normal shell it re-launches itself under mpirun (executor/launch.h);
// under mpirun every rank executes and rank 0 prints.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "base/input_error.h"
#include "base/text.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/describe.h"
#include "cli/table.h"
#include "executor/device.h"
#include "executor/launch.h"
#include "executor/validate.h"
#include "kernels/comm.h"
#include "base/atomic_file.h"
#include "base/input_error.h"
#include "sim/trace_writer.h"

namespace zplan::cli {

namespace {

struct ValidateCliOptions {
  SetupOptions setup;
  int ranks = 2;
  int steps = 3;
  int warmup = 1;
  bool json = false;
  std::optional<double> max_error_pct;
  std::string trace;
  bool force = false;
  std::string swap_dir;
  double comm_timeout_s = 60;
  int fail_rank = -1;
  std::string device = "cpu";
};

std::string time_text(double s) { return strformat("%.4f s", s); }
std::string mib_text(double bytes) { return strformat("%.1f MiB", bytes / (1024.0 * 1024.0)); }

void print_report(std::ostream& out, const Setup& s, const executor::ValidationReport& r,
                  int ranks) {
  out << "zplan validate: " << describe_run(s.model, s.cluster) << '\n'
      << "  " << describe_config(s.config, s.workload) << '\n'
      << "  executed on " << ranks << " rank" << (ranks == 1 ? "" : "s") << ": "
      << r.measured.device << ", " << r.measured.comm << ", pinned memory " << r.measured.pinned;
  if (!r.measured.swap.empty()) out << ", NVMe swap " << r.measured.swap;
  out << '\n';
  out << "  measured steps:";
  for (double t : r.measured.step_s) out << strformat(" %.4f", t);
  out << strformat(" s (median reported); loss %.5f -> %.5f\n\n",
                   r.measured.loss.empty() ? 0.0 : r.measured.loss.front(),
                   r.measured.loss.empty() ? 0.0 : r.measured.loss.back());
  Table t({"", "predicted", "measured", "error"}, {false, true, true, true});
  for (const executor::ValidationRow& row : r.time) {
    t.add_row({row.name + (row.checked ? " *" : ""), time_text(row.predicted),
               time_text(row.measured), strformat("%+.1f%%", 100 * row.error())});
  }
  for (const executor::ValidationRow& row : r.memory) {
    t.add_row({row.name + (row.checked ? " *" : ""), mib_text(row.predicted),
               mib_text(row.measured), strformat("%+.1f%%", 100 * row.error())});
  }
  t.print(out, "  ");
  out << "\n  busy time by kind of task (summed over the step; rank 0):\n";
  Table k({"", "predicted", "measured", "error"}, {false, true, true, true});
  for (const executor::ValidationRow& row : r.tasks) {
    k.add_row({row.name, time_text(row.predicted), time_text(row.measured),
               strformat("%+.1f%%", 100 * row.error())});
  }
  k.print(out, "  ");
  out << "\n  * checked by --max-error. Memory is per rank, without the runtime category.\n"
      << (r.measured.device.rfind("cpu", 0) == 0
              ? strformat("  compute waited %.4f s for work on other resources (one core per "
                          "rank)\n",
                          r.measured.compute_wait_s)
              : std::string());
}

int run_validate(ValidateCliOptions o) {
  if (o.setup.gpus == 0) o.setup.gpus = o.ranks;
  if (o.setup.gpus != o.ranks) {
    throw InputError("--ranks", "and --gpus disagree (" + std::to_string(o.ranks) + " vs " +
                                    std::to_string(o.setup.gpus) + "); give one of them");
  }
  if (o.ranks < 1) throw InputError("--ranks", "must be at least 1");
  if (o.steps < 1) throw InputError("--steps", "must be at least 1");
  if (o.warmup < 0) throw InputError("--warmup", "must not be negative");
  if (o.max_error_pct && !(*o.max_error_pct >= 0)) {
    throw InputError("--max-error", "must be a percentage >= 0");
  }
  if (!o.trace.empty()) check_output_file(o.trace, o.force);
  check_output_not_input("--trace", o.trace, setup_inputs(o.setup));
  // Bad input is reported here, once, before any rank starts.
  if (!(o.comm_timeout_s > 0)) {
    throw InputError("--comm-timeout", "must be more than 0 seconds");
  }
  const bool cuda = o.device == "cuda";
  if (cuda && !executor::executor_has_cuda()) {
    throw InputError("--device cuda",
                     "this zplan was built without the CUDA executor device "
                     "(configure with the CUDA toolkit and nvcc on PATH)");
  }
  Setup s = resolve_setup(o.setup);
  // The reference executor trains every parameter of the graph it runs.
  if (s.model.finetune().frozen()) {
    throw InputError(s.model.finetune().lora() ? "--lora-rank" : "--trainable",
                     "validate runs the reference executor, which trains every parameter; "
                     "predict fine-tuning with simulate, memory or plan");
  }
  if (s.workload.sequence_parallel > 1) {
    throw InputError(json_location(o.setup.ds_config, "/sequence_parallel_size"),
                     "validate runs the reference executor, which does not split sequences; "
                     "predict Ulysses sequence parallelism with simulate or memory");
  }
  if (s.workload.tensor_parallel > 1) {
    throw InputError(o.setup.ds_config.empty()
                         ? std::string("--autotp")
                         : json_location(o.setup.ds_config, "/tensor_parallel/autotp_size"),
                     "validate runs the reference executor, which does not split layers; "
                     "predict AutoTP with simulate, memory or plan");
  }
  if (!s.config.optimizer.is_adam()) {
    throw InputError(json_location(o.setup.ds_config, "/optimizer/type"),
                     "validate runs the reference executor, whose optimizer is Adam; predict " +
                         s.config.optimizer.name + " with simulate or memory");
  }
  if (s.config.optimizer.low_precision_master()) {
    const bool bf16 = s.config.precision == sim::Precision::kBf16;
    throw InputError(json_location(o.setup.ds_config, bf16 ? "/bf16/bf16_master_weights_and_grads"
                                                           : "/fp16/fp16_master_weights_and_grads"),
                     "validate runs the reference executor, whose master weights are fp32; "
                     "predict 16-bit master weights with simulate or memory");
  }
  if (cuda && s.cluster.profile.gpu.arch == hardware::Arch::kCpu) {
    throw InputError("--device cuda", "--hw " + o.setup.hw +
                                          " describes a CPU; give the GPU's profile (a stock one "
                                          "or zplan calibrate's on this machine)");
  }
  executor::check_executor_supports(s.config, s.cluster);
  executor::check_executor_fits(s.model, s.cluster, s.config, s.workload, o.swap_dir,
                                /*device_memory_is_host=*/!cuda);

  // Notes are printed once: before a re-launch, or by rank 0 of a job started under mpirun.
  const bool relaunched = executor::relaunched();
  const bool says_notes = !relaunched && kernels::mpi_launcher_rank() <= 0;
  if (says_notes) print_notes(s.notes);
  if (!cuda && s.cluster.profile.gpu.arch != hardware::Arch::kCpu && says_notes) {
    // The ranks below are CPU ranks whatever the profile says.
    std::cerr << "zplan: note: --hw " << o.setup.hw << " describes " << s.cluster.profile.gpu.name
              << ", but the executor runs on CPU ranks: predicted times are for that hardware, "
                 "measured ones for this CPU (memory compares either way); calibrate this machine "
                 "with zplan calibrate --backend host,mpi --out cpu.json\n";
  }
  if (executor::needs_mpirun(o.ranks)) {
    const executor::RelaunchResult r = executor::relaunch_under_mpirun(o.ranks);
    if (r.signal == 0) return r.exit_code;
    std::cerr << "zplan: mpirun ended by signal " << r.signal << "\n";
    return kExitBadInput;
  }

  executor::RankOptions ro;
  ro.ranks = o.ranks;
  ro.cuda = cuda;
  ro.ranks_per_node = s.cluster.gpus_per_node();
  ro.node_cpus = s.cluster.profile.node.cpu_cores;
  ro.comm_timeout_s = o.comm_timeout_s;
  executor::Rank me(ro);
  const int rank = me.rank();

  executor::ValidateOptions vo;
  vo.execute.steps = o.steps;
  vo.execute.warmup_steps = o.warmup;
  vo.execute.swap_dir = o.swap_dir;
  vo.execute.fail_rank = o.fail_rank;
  vo.execute.comm_timeout_s = o.comm_timeout_s;
  std::unique_ptr<sim::TraceWriter> trace;
  if (!o.trace.empty() && rank == 0) {
    trace = std::make_unique<sim::TraceWriter>(s.model);
    vo.measured_trace = trace.get();
  }
  executor::ValidationReport report =
      executor::validate(s.model, s.cluster, s.config, s.workload, me.device(), vo);
  const bool failed = o.max_error_pct && 100 * report.max_checked_error() > *o.max_error_pct;
  if (rank == 0) {
    if (trace) write_file_atomically(o.trace, trace->json(), o.force);
    if (o.json) {
      nlohmann::json j = setup_to_json(s);
      j["ranks"] = o.ranks;
      j["validation"] = report.to_json();
      if (o.max_error_pct) {
        j["max_error_pct"] = *o.max_error_pct;
        j["passed"] = !failed;
      }
      std::cout << j.dump(2) << '\n';
    } else {
      print_report(std::cout, s, report, o.ranks);
      if (!o.trace.empty()) std::cout << "  measured trace written to " << o.trace << '\n';
      if (o.max_error_pct) {
        std::cout << strformat("  %s: largest checked error %.3g%% (limit %.3g%%)\n",
                               failed ? "FAILED" : "passed", 100 * report.max_checked_error(),
                               *o.max_error_pct);
      }
    }
    std::cout.flush();
  }
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

void setup_validate_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<ValidateCliOptions>();
  o->setup.default_precision = "fp32";  // the executor trains in fp32
  CLI::App* sub = app.add_subcommand(
      "validate",
      "run one step for real (MPI ranks on the CPU, or on GPUs with --device cuda) and compare "
      "it with the simulation");
  add_setup_options(*sub, o->setup, /*zero_flags=*/true);
  sub->get_option("--nvme-path")
      ->description(
          "nvme_path of NVMe offload; without --swap-dir, the swap files go there if it is a "
          "writable directory");
  sub->get_option("--precision")
      ->description("bf16, fp16 or fp32 (default: fp32, as the executor trains)");
  // --ranks is validate's name for --gpus: one rank stands for one device.
  sub->get_option("--gpus")->required(false)->group("");
  sub->add_option("--ranks", o->ranks, "ranks (devices) to run; re-launches under mpirun if > 1")
      ->capture_default_str();
  sub->add_option("--device", o->device,
                  "what a rank runs on: cpu (one core per rank, BLAS) or cuda (one GPU per rank, "
                  "cuBLAS + NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--steps", o->steps, "measured optimizer steps (the median is reported)")
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "optimizer steps run before measuring")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "print JSON instead of tables");
  sub->add_option("--max-error", o->max_error_pct,
                  "exit 4 if step time or a memory peak is off by more than PCT percent");
  sub->add_option("--trace", o->trace, "write the measured Chrome/Perfetto trace to this file");
  sub->add_flag("--force", o->force, "replace an existing --trace file");
  sub->add_option("--swap-dir", o->swap_dir,
                  "directory for NVMe swap files (default: the config's nvme_path, else $TMPDIR)");
  sub->add_option("--comm-timeout", o->comm_timeout_s,
                  "seconds a collective may make no progress before the job is aborted")
      ->capture_default_str();
  sub->add_option("--fail-rank", o->fail_rank, "testing: this rank dies in the first measured step")
      ->group("");
  sub->callback([o, action] { *action = [o] { return run_validate(*o); }; });
}

}  // namespace zplan::cli
