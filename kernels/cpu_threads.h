// How many threads one CPU rank runs its BLAS, Adam and memory kernels on.
//
// A rank's fair share is the node's CPUs divided by the ranks on the node, but it can only use
// the CPUs its affinity mask allows. Open MPI binds each rank to one core by default when it
// starts two ranks or fewer (mpirun --bind-to core; to the socket beyond that): a rank given
// cores / ranks threads on a 16-core node would then run 8 BLAS threads on one core, where each
// parallel GEMM waits for all 8 to be scheduled in turn. std::thread::hardware_concurrency() and
// sysconf(_SC_NPROCESSORS_ONLN) count every online CPU and do not see the binding;
// sched_getaffinity(2) does.
#ifndef ZPLAN_KERNELS_CPU_THREADS_H_
#define ZPLAN_KERNELS_CPU_THREADS_H_

namespace zplan::kernels {

// CPUs this process may run on (its sched_getaffinity mask); the online CPUs if that fails.
int usable_cpus();

// Threads for one of `local_ranks` ranks sharing a node of `cpus` CPUs when the rank may run on
// `usable` of them: the fair share cpus / local_ranks, at most `usable`, at least 1.
int rank_threads(int cpus, int local_ranks, int usable);

}  // namespace zplan::kernels

#endif  // ZPLAN_KERNELS_CPU_THREADS_H_
