// FrameworkSpec: what the software stack around the kernels costs (eager PyTorch + DeepSpeed), as
// opposed to what the hardware costs (profile.h). Each member is one mechanism, priced by the
// framework functions of cost_model.h; docs/cost_model.md §14 derives each term.
//
// The values no source gives are FITTED once over the public fidelity set
// (tests/fidelity/cases.json) by `scripts/fidelity.sh --fit` (tests/fidelity/fit.json), with a
// leave-one-source-out check; docs/fidelity.md reports both. The fitted values live in ONE place,
// fitted_framework() in framework.cc, never as per-case factors. A profile may override any of
// them in its optional "framework" section (docs/formats.md); the fit does exactly that.
//
// A default-constructed FrameworkSpec charges nothing (the idealized profiles of the tests); a
// profile read from JSON starts from fitted_framework(). CPU "devices" (arch cpu, zplan's own
// executor, docs/validation.md) run no Python and no OpenMP pool per rank, so the framework
// functions charge them nothing either.
#ifndef ZPLAN_HARDWARE_FRAMEWORK_H_
#define ZPLAN_HARDWARE_FRAMEWORK_H_

namespace zplan::hardware {

struct FrameworkSpec {
  // Host time to issue one eager operator: Python, the ATen dispatcher and the CUDA launch. The
  // GPU runs asynchronously, so a stretch of work takes max(kernel time, ops x this).
  double host_op_s = 0;
  // Host time of one optimizer step outside the kernels it launches: DeepSpeedEngine.step()'s
  // Python, the loss scaler, the LR scheduler, zero_grad, the data loader's next batch.
  double step_overhead_s = 0;
  // Host time of DeepSpeed's stage-3 module hooks per gathered module and use, beyond the
  // operators they launch (sim/step_costs.h stage3_fetch_host_ops counts those): the Python of
  // fetch_sub_module and release_sub_module in partitioned_param_coordinator.py -- the trace and
  // step-id bookkeeping, the walk of the prefetch queue, each parameter's status and
  // availability accounting, the release decision by reuse distance -- which issues no kernel,
  // so the per-operator time does not see it. It adds to the host floor of every piece whose
  // module stage 3 gathers.
  double stage3_fetch_s = 0;
  // Fraction of its fair share of the host cores (cores / ranks per node) that one rank's
  // DeepSpeedCPUAdam reaches when every rank of the node runs it at once (deepspeed/launcher/
  // launch.py sets OMP_NUM_THREADS only with --bind_cores_to_rank, so by default the ranks'
  // OpenMP pools oversubscribe the cores). 1 = no loss.
  double cpu_oversubscription_efficiency = 1;
  // OMP_NUM_THREADS as every rank of the job starts with it: DeepSpeedCPUAdam's `#pragma omp
  // parallel for` (csrc/adam/cpu_adam_impl.cpp) runs that many threads. 0 = unset, as the
  // `deepspeed` launcher leaves it (launch.py sets it to cores / ranks only with
  // --bind_cores_to_rank): OpenMP then takes every core and the node's ranks oversubscribe them.
  // torchrun (and accelerate, which calls it) sets it to 1 when it starts more than one process
  // per node and the variable is unset (torch/distributed/run.py). A launch setting, not fitted.
  int omp_num_threads = 0;
};

// The fitted constants (framework.cc): what every profile read from JSON starts from.
const FrameworkSpec& fitted_framework();

}  // namespace zplan::hardware

#endif  // ZPLAN_HARDWARE_FRAMEWORK_H_
