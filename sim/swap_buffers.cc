// NVMe swap-buffer sizes (sim/swap_buffers.h); each rule names the DeepSpeed 0.19.5 code it
// follows.
#include "sim/swap_buffers.h"

#include <algorithm>

namespace zplan::sim {

namespace {

// DeepSpeedZeroOffloadParamConfig.buffer_size's default, pp_int(1e8) (zero/offload_config.py).
constexpr int64_t kDefaultParamBufferSize = 100'000'000;

}  // namespace

int64_t aio_numel_alignment(const AioConfig& aio, int element_bytes) {
  // aligned_bytes = AIO_ALIGNED_BYTES * intra_op_parallelism; numel_alignment = aligned_bytes //
  // element size (partitioned_param_swapper.py _configure_aio).
  return std::max<int64_t>(1, kAioAlignedBytes * aio.intra_op_parallelism / element_bytes);
}

int64_t io_aligned_numel(int64_t numel, int64_t alignment) {
  const int64_t remainder = numel % alignment;
  return remainder == 0 ? numel : numel + alignment - remainder;
}

int64_t largest_swapped_param_slice(const models::Model& model, int dp, const DsConfig& config) {
  const int64_t largest = model.largest_param_numel();
  // _partition_param: partition_size = _aligned_size(param) // world size, the tensor padded to a
  // multiple of the data-parallel size.
  const int64_t slice = (largest + dp - 1) / dp;
  // swappable_tensor: min_aio_bytes <= numel * element size, min_aio_bytes = max(MIN_AIO_BYTES,
  // aio.block_size).
  const int64_t min_bytes = std::max(kMinAioBytes, config.aio.block_size);
  return slice * precision_bytes(config.precision) >= min_bytes ? slice : 0;
}

int64_t param_swap_buffer_size(const models::Model& model, int dp, const DsConfig& config) {
  const int64_t slice = largest_swapped_param_slice(model, dp, config);
  if (slice <= kDefaultParamBufferSize) return kDefaultParamBufferSize;
  return io_aligned_numel(slice,
                          aio_numel_alignment(config.aio, precision_bytes(config.precision)));
}

double param_swap_buffer_bytes(const DsConfig& config) {
  const OffloadParamConfig& prm = config.zero.offload_param;
  if (prm.device != OffloadDevice::kNvme) return 0;
  const int p = precision_bytes(config.precision);
  const int64_t aligned = io_aligned_numel(prm.buffer_size, aio_numel_alignment(config.aio, p));
  return static_cast<double>(p) * static_cast<double>(prm.buffer_count) *
         static_cast<double>(aligned);
}

}  // namespace zplan::sim
