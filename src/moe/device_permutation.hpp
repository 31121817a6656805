// The MoE permutation on a GPU (kernels/ragdot/moe_permute.cuh, moe_combine_backward.cuh): the
// stable sort of the (token, slot) pairs by expert, the gather of their rows and the weighted
// combine, and the combine's backward, all enqueued
// on the caller's stream with no host sync. The group sizes the expert ragged dots need are an
// output on the device. Built only with CUDA; the host path is moe/permutation.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "ragdot/dtype.hpp"
#include "ragdot/status.hpp"

namespace ragdot::moe {

// Device buffers of one sort, all int32: what DevicePermutation::sort writes.
struct DeviceSortBuffers {
  void* group_sizes = nullptr;  // [experts]
  void* row_of = nullptr;       // [pairs]
  void* pair_of = nullptr;      // [pairs]; rows past the valid ones are -1
  void* bad_experts = nullptr;  // [1]: pairs whose expert was out of range (they get no row)
  // [pairs], or null: the token of each sorted row (pair / top_k); rows past the valid ones are -1
  void* token_of = nullptr;
  // [pairs] float32, or null: the combine weight of each sorted row's pair (sort's pair_weights);
  // rows past the valid ones are 0
  void* weight_of = nullptr;
};

// How sort() runs: the same stable sort either way (the same outputs, bit for bit).
enum class SortKernel {
  kChunked,   // count per chunk of 256 pairs, offsets, scatter: three launches
  kOneBlock,  // one launch of one 1024-thread block (32 warps, one run of pairs each)
};
// RAGDOT_MOE_SORT ("chunked" or "one_block"); unset: kChunked. Another value is an error.
Result<SortKernel> sort_kernel_from_env();

// How the kernels that walk the sorted rows run: gather() (the same rows, bit for bit) and
// combine_backward() (the same scaled rows; the dots summed in another order).
enum class RowKernel {
  kBlock,  // one 256-thread block per row, one 16-byte piece (8 elements) per thread
  kWarps,  // one warp per row, ~4 rows per warp, a lane's loads of a row in flight together
};
// RAGDOT_MOE_ROWS ("block" or "warps": both row kernels); unset: nullopt (the defaults below).
// Another value is an error.
Result<std::optional<RowKernel>> row_kernel_from_env();

// The permutation's kernel choices. The defaults are the faster of each on an H200
// (bench/RESULTS.md, 2026-12-05): the gather by warps (qwen3-30b-a3b, 4096 tokens: 0.045 against
// 0.056 ms), the combine's backward by blocks (0.102 against 0.117 ms), and the chunked sort (the
// one-block sort's single block walks every pair: 0.080 against 0.028 ms at 32768 pairs).
struct PermutationKernels {
  SortKernel sort = SortKernel::kChunked;
  RowKernel gather = RowKernel::kWarps;
  RowKernel combine_backward = RowKernel::kBlock;
};
// Both from the environment (RAGDOT_MOE_SORT, RAGDOT_MOE_ROWS).
Result<PermutationKernels> permutation_kernels_from_env();

class DevicePermutation {
 public:
  // Loads the kernels on GPU `device` (JIT-compiled once, then from the cache) for up to
  // `max_pairs` pairs and `experts` experts (at most 1024); sort() and gather() run `kernels`.
  static Result<DevicePermutation> create(int device, std::int64_t max_pairs, std::int64_t experts,
                                          PermutationKernels kernels);
  // The same, with the kernels the environment names (permutation_kernels_from_env).
  static Result<DevicePermutation> create(int device, std::int64_t max_pairs, std::int64_t experts);

  // Scratch for sort(): bytes of device memory, 256-byte aligned.
  std::size_t sort_workspace_bytes() const;

  // experts [pairs] int32 on the device -> out. `stream` is a CUstream (null: the legacy stream).
  // top_k: pairs per token, for out.token_of; pair_weights [pairs] float32: the combine weights,
  // for out.weight_of (both or neither).
  Status sort(const void* experts, std::int64_t pairs, const DeviceSortBuffers& out, void* workspace,
              void* stream, std::int64_t top_k = 1, const float* pair_weights = nullptr) const;
  // y[t] = acc[t] + addend[t] (if given), rounded to y's dtype: the end of a combine whose rows
  // were added into acc [tokens, hidden] float32 (PlanOptions::out_scatter_rows). y and addend
  // bf16 or f32.
  Status finish_combine(const float* acc, const void* addend, std::int64_t tokens, std::int64_t hidden, DType dtype,
                        void* y, void* stream) const;
  // rows[r] = scale[t] * x[t] for the pair (t, j) of sorted row r; x [tokens, hidden], rows
  // [tokens * top_k, hidden], bf16 or f32; scale [tokens] f32 or null. With pair_weights
  // [tokens * top_k] f32 instead (not both): rows[r] = pair_weights[t k + j] * x[t], the rows'
  // gradient in the combine's backward (x = dy, the combine weights).
  Status gather(const void* x, const float* scale, const DeviceSortBuffers& sorted, std::int64_t tokens,
                std::int64_t top_k, std::int64_t hidden, DType dtype, void* rows, void* stream,
                const float* pair_weights = nullptr) const;
  // y[t] (+)= addend[t] + sum_j weights[t, j] * rows[row_of[t, j]], accumulated in f32; weights
  // [tokens, top_k] f32; addend [tokens, hidden] of the rows' dtype, or null.
  Status combine(const void* rows, const float* weights, const DeviceSortBuffers& sorted, std::int64_t tokens,
                 std::int64_t top_k, std::int64_t hidden, DType dtype, bool accumulate, void* y, void* stream,
                 const void* addend = nullptr) const;
  // The combine's backward, per sorted row r of the pair (t, j): scaled[r] = weights[t, j] *
  // token_rows[t] (if scaled is not null) and dots[t, j] = token_rows[t] . sorted_rows[r] (if dots
  // is not null), f32 sums. With token_rows = dy and sorted_rows = the expert outputs: the rows'
  // and the combine weights' gradients; with token_rows = x and sorted_rows = the rows' gradients:
  // the gradient of a per-token input scale (summed over the token's pairs).
  Status combine_backward(const void* token_rows, const void* sorted_rows, const float* weights,
                          const DeviceSortBuffers& sorted, std::int64_t tokens, std::int64_t top_k, std::int64_t hidden,
                          DType dtype, void* scaled, float* dots, void* stream) const;

  DevicePermutation(DevicePermutation&&) noexcept;
  DevicePermutation& operator=(DevicePermutation&&) noexcept;
  ~DevicePermutation();

 private:
  struct State;
  explicit DevicePermutation(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ragdot::moe
