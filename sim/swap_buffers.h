// NVMe swap buffers: what DeepSpeed 0.19's parameter swapper needs from offload_param and the aio
// block, and the pinned host memory its buffers take. Element counts unless a name says bytes.
//
// Sources (deepspeedai/DeepSpeed v0.19.5): runtime/swap_tensor/partitioned_param_swapper.py
// (AsyncPartitionedParameterSwapper: _configure_aio, swappable_tensor, get_buffer,
// _io_aligned_numel, reserve_partitioned_swap_space), runtime/swap_tensor/utils.py (MIN_AIO_BYTES,
// AIO_ALIGNED_BYTES), runtime/zero/partition_parameters.py (_partition_param: each swappable
// parameter's per-rank slice goes into one swap buffer at zero.Init) and runtime/zero/stage3.py
// (_create_fp16_partitions_with_defragmentation: the pinned reuse buffer); reference
// deepspeed_internals.md §2.2 "NVMe swap buffers".
#ifndef ZPLAN_SIM_SWAP_BUFFERS_H_
#define ZPLAN_SIM_SWAP_BUFFERS_H_

#include <cstdint>

#include "models/model.h"
#include "sim/zero_config.h"

namespace zplan::sim {

// utils.py: tensors smaller than max(MIN_AIO_BYTES, aio.block_size) bytes are not swapped; swap
// I/O is aligned to AIO_ALIGNED_BYTES x aio.intra_op_parallelism bytes.
inline constexpr int64_t kMinAioBytes = 1024 * 1024;
inline constexpr int64_t kAioAlignedBytes = 1024;

// Elements of one I/O alignment unit for elements of `element_bytes` (_configure_aio's
// numel_alignment).
int64_t aio_numel_alignment(const AioConfig& aio, int element_bytes);
// `numel` rounded up to a multiple of `alignment` (_io_aligned_numel).
int64_t io_aligned_numel(int64_t numel, int64_t alignment);

// The largest per-rank slice the parameter swapper puts into one swap buffer: ceil(numel / dp) of
// the largest tensor (partition_parameters.py pads each tensor to a multiple of dp), or 0 when
// that slice is under the swappable minimum (then no tensor is swapped). get_buffer asserts
// "More elements {numel} than buffer size" for a slice over offload_param.buffer_size.
int64_t largest_swapped_param_slice(const models::Model& model, int dp, const DsConfig& config);

// The offload_param.buffer_size zplan writes: DeepSpeed's default 1e8 elements, or the largest
// swapped slice rounded up to the I/O alignment when that is more.
int64_t param_swap_buffer_size(const models::Model& model, int dp, const DsConfig& config);

// Pinned host bytes per rank of the parameter swapper's buffers: one locked tensor of
// buffer_count x aligned(buffer_size) elements of the model dtype (_configure_aio). 0 unless
// offload_param.device is nvme (with aio.use_gds they are on the GPU; zplan does not model GDS).
double param_swap_buffer_bytes(const DsConfig& config);

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_SWAP_BUFFERS_H_
