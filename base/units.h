// Byte units. Memory is counted in binary units (GiB = 2^30 bytes), as nvidia-smi, PyTorch and
// DeepSpeed's memory reports count it; bandwidths are in decimal GB/s (1e9 B/s), as NCCL and
// nccl-tests count them, and are written out where they are used.
#ifndef ZPLAN_BASE_UNITS_H_
#define ZPLAN_BASE_UNITS_H_

namespace zplan {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * kKiB;
inline constexpr double kGiB = 1024.0 * kMiB;

}  // namespace zplan

#endif  // ZPLAN_BASE_UNITS_H_
