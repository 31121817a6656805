#include "moe/device_permutation.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/loaded_kernel.hpp"
#include "core/env.hpp"

extern "C" {
#include "ragdot/moe_params.h"
}

namespace ragdot::moe {

namespace {
constexpr unsigned kRowThreads = 256;
constexpr std::int64_t kMaxGrid = 65535;
std::size_t align_up(std::size_t x) { return (x + 255) / 256 * 256; }
std::int64_t chunks_of(std::int64_t pairs) { return (pairs + RAGDOT_MOE_CHUNK - 1) / RAGDOT_MOE_CHUNK; }
// ragdot_moe_sort_one_block's dynamic shared memory: one int per warp (32) and expert
std::int64_t one_block_table_bytes(std::int64_t experts) { return 32 * experts * 4; }
// Past this many pairs the one-block sort (one SM) hands over to the chunked one, whose count and
// scatter kernels spread over the GPU: 32768 tokens of top-8 are 256Ki pairs, ~8Ki per warp.
constexpr std::int64_t kOneBlockMaxPairs = std::int64_t(1) << 17;
// The warp-per-row kernels give each warp about this many rows, so that it loads the next row's
// pair while it works on one; the grid stays within what the GPU holds at once.
constexpr std::int64_t kRowsPerWarp = 4;
std::int64_t warp_row_blocks(std::int64_t rows, const cuda::Device& device) {
  constexpr std::int64_t kRowsPerBlock = kRowThreads / 32 * kRowsPerWarp;
  return std::min<std::int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, std::int64_t(device.multiprocessors) * 8);
}
// Gathered rows larger than this are stored streaming (evict first): they cannot stay in L2
// for the up projection anyway, and would push out the tokens the gather reads top-k times.
constexpr std::int64_t kStreamRowsBytes = std::int64_t(32) << 20;
}  // namespace

struct DevicePermutation::State {
  const cuda::Device* device = nullptr;
  std::shared_ptr<const cuda::LoadedModule> module, backward_module;
  CUfunction count = nullptr, offsets = nullptr, scatter = nullptr, gather = nullptr, combine = nullptr;
  CUfunction combine_backward = nullptr, sort_one_block = nullptr, gather_warps = nullptr, finish_combine = nullptr;
  CUfunction combine_backward_warps = nullptr;
  std::int64_t max_pairs = 0, experts = 0;
  PermutationKernels kernels;
  bool one_block_fits = false;  // the one-block sort's table fits the device's shared memory
};

Result<SortKernel> sort_kernel_from_env() {
  const std::optional<std::string> v = env::moe_sort();
  if (!v || *v == "chunked") return SortKernel::kChunked;
  if (*v == "one_block") return SortKernel::kOneBlock;
  return invalid_argument("RAGDOT_MOE_SORT must be chunked or one_block, got '" + *v + "'");
}

Result<std::optional<RowKernel>> row_kernel_from_env() {
  const std::optional<std::string> v = env::moe_rows();
  if (!v) return std::optional<RowKernel>();
  if (*v == "block") return std::optional<RowKernel>(RowKernel::kBlock);
  if (*v == "warps") return std::optional<RowKernel>(RowKernel::kWarps);
  return invalid_argument("RAGDOT_MOE_ROWS must be block or warps, got '" + *v + "'");
}

Result<PermutationKernels> permutation_kernels_from_env() {
  PermutationKernels k;
  RAGDOT_ASSIGN_OR_RETURN(k.sort, sort_kernel_from_env());
  RAGDOT_ASSIGN_OR_RETURN(std::optional<RowKernel> rows, row_kernel_from_env());
  if (rows) k.gather = k.combine_backward = *rows;
  return k;
}

DevicePermutation::DevicePermutation(std::unique_ptr<State> s) : s_(std::move(s)) {}
DevicePermutation::DevicePermutation(DevicePermutation&&) noexcept = default;
DevicePermutation& DevicePermutation::operator=(DevicePermutation&&) noexcept = default;
DevicePermutation::~DevicePermutation() = default;

Result<DevicePermutation> DevicePermutation::create(int device, std::int64_t max_pairs, std::int64_t experts) {
  RAGDOT_ASSIGN_OR_RETURN(PermutationKernels kernels, permutation_kernels_from_env());
  return create(device, max_pairs, experts, kernels);
}

Result<DevicePermutation> DevicePermutation::create(int device, std::int64_t max_pairs, std::int64_t experts,
                                                    PermutationKernels kernels) {
  if (experts < 1 || experts > RAGDOT_MOE_MAX_EXPERTS) {
    return invalid_argument("the device permutation takes 1 to " + std::to_string(RAGDOT_MOE_MAX_EXPERTS) +
                            " experts, got " + std::to_string(experts));
  }
  // row indices are int32 on the device
  if (max_pairs < 0 || max_pairs > std::int64_t(0x7fffffff)) {
    return invalid_argument("the device permutation takes at most 2^31 - 1 pairs, got " + std::to_string(max_pairs));
  }
  auto s = std::make_unique<State>();
  RAGDOT_ASSIGN_OR_RETURN(s->device, cuda::device(device));
  RAGDOT_ASSIGN_OR_RETURN(s->module,
                          cuda::load_module(*s->device, "#include \"ragdot/moe_permute.cuh\"\n", "ragdot_moe_permute.cu"));
  const struct {
    CUfunction* f;
    const char* name;
  } fns[] = {{&s->count, "ragdot_moe_count"},
             {&s->offsets, "ragdot_moe_offsets"},
             {&s->scatter, "ragdot_moe_scatter"},
             {&s->gather, "ragdot_moe_gather"},
             {&s->combine, "ragdot_moe_combine"},
             {&s->sort_one_block, "ragdot_moe_sort_one_block"},
             {&s->gather_warps, "ragdot_moe_gather_warps"},
             {&s->finish_combine, "ragdot_moe_finish_combine"}};
  for (const auto& f : fns) {
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(f.f, s->module->module, f.name), f.name);
  }
  // The one-block sort's [32 warps, experts] table: past 48 KiB (384 experts) it needs the
  // device's opt-in limit, and where that is too small (1024 experts on a 99 KiB GPU) the
  // chunked sort runs instead.
  s->kernels = kernels;
  if (kernels.sort == SortKernel::kOneBlock) {
    const std::int64_t table = one_block_table_bytes(experts);
    s->one_block_fits = table + 1024 <= s->device->traits.max_dynamic_smem;  // (plus its static scan scratch)
    // (always raised: the kernel's static scan scratch counts against the same 48 KiB default, so
    // a table of exactly 48 KiB, 384 experts, needs the opt-in too)
    if (s->one_block_fits) {
      RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuFuncSetAttribute(
                                    s->sort_one_block, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(table)),
                                "cuFuncSetAttribute (ragdot_moe_sort_one_block's shared memory)");
    }
  }
  RAGDOT_ASSIGN_OR_RETURN(s->backward_module,
                          cuda::load_module(*s->device, "#include \"ragdot/moe_combine_backward.cuh\"\n",
                                            "ragdot_moe_combine_backward.cu"));
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&s->combine_backward, s->backward_module->module,
                                                                "ragdot_moe_combine_backward"),
                            "ragdot_moe_combine_backward");
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&s->combine_backward_warps, s->backward_module->module,
                                                                "ragdot_moe_combine_backward_warps"),
                            "ragdot_moe_combine_backward_warps");
  s->max_pairs = max_pairs;
  s->experts = experts;
  return DevicePermutation(std::move(s));
}

std::size_t DevicePermutation::sort_workspace_bytes() const {
  return align_up(std::size_t(std::max<std::int64_t>(chunks_of(s_->max_pairs), 1) * s_->experts) * sizeof(int));
}

Status DevicePermutation::sort(const void* experts, std::int64_t pairs, const DeviceSortBuffers& out, void* workspace,
                               void* stream, std::int64_t top_k, const float* pair_weights) const {
  if (top_k < 1 || top_k > RAGDOT_MOE_MAX_TOP_K) return invalid_argument("sort: top_k " + std::to_string(top_k));
  if (pairs < 0 || pairs > s_->max_pairs) {
    return invalid_argument("sort: " + std::to_string(pairs) + " pairs, the permutation was made for at most " +
                            std::to_string(s_->max_pairs));
  }
  if (!out.group_sizes || !out.bad_experts || (pairs > 0 && (!experts || !out.row_of || !out.pair_of || !workspace))) {
    return invalid_argument("sort: a null device buffer");
  }
  if ((out.weight_of == nullptr) != (pair_weights == nullptr)) {
    return invalid_argument("sort: the rows' combine weights (weight_of) need the pairs' (pair_weights), and back");
  }
  cuda::ScopedContext ctx(s_->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  CUstream st = static_cast<CUstream>(stream);
  RagdotMoeSortParams p{};
  p.experts = static_cast<const int*>(experts);
  p.pairs = pairs;
  p.num_experts = int(s_->experts);
  p.num_chunks = int(chunks_of(pairs));
  p.chunk_counts = static_cast<int*>(workspace);
  p.group_sizes = static_cast<int*>(out.group_sizes);
  p.row_of = static_cast<int*>(out.row_of);
  p.pair_of = static_cast<int*>(out.pair_of);
  p.token_of = static_cast<int*>(out.token_of);
  p.top_k = int(top_k);
  p.pair_weights = pair_weights;
  p.weight_of = static_cast<float*>(out.weight_of);
  p.bad_experts = static_cast<int*>(out.bad_experts);
  const auto* d = cuda::driver();
  void* args[] = {&p};
  if (s_->kernels.sort == SortKernel::kOneBlock && s_->one_block_fits && pairs <= kOneBlockMaxPairs) {
    // it writes every output itself, the group sizes and the bad count even with no pairs
    RAGDOT_CU_RETURN_IF_ERROR(d->cuLaunchKernel(s_->sort_one_block, 1, 1, 1, 1024, 1, 1,
                                                unsigned(one_block_table_bytes(p.num_experts)), st, args, nullptr),
                              "launching ragdot_moe_sort_one_block");
    return Status::ok();
  }
  // no memsets: the offsets kernel writes the out-of-range count and the rows no pair takes
  if (p.num_chunks > 0) {
    RAGDOT_CU_RETURN_IF_ERROR(d->cuLaunchKernel(s_->count, unsigned(p.num_chunks), 1, 1, 32, 1, 1, 0, st, args, nullptr),
                              "launching ragdot_moe_count");
  }
  // with no pairs the offsets kernel still writes the (zero) group sizes and count
  RAGDOT_CU_RETURN_IF_ERROR(d->cuLaunchKernel(s_->offsets, 1, 1, 1, 1024, 1, 1, 0, st, args, nullptr),
                            "launching ragdot_moe_offsets");
  if (p.num_chunks > 0) {
    RAGDOT_CU_RETURN_IF_ERROR(
        d->cuLaunchKernel(s_->scatter, unsigned(p.num_chunks), 1, 1, 32, 1, 1, 0, st, args, nullptr),
        "launching ragdot_moe_scatter");
  }
  return Status::ok();
}

namespace {

// The checks and the argument block gather and combine share.
Result<RagdotMoeRowsParams> rows_params(const char* what, const DeviceSortBuffers& sorted, std::int64_t tokens,
                                        std::int64_t top_k, std::int64_t hidden, DType dtype, std::int64_t max_pairs) {
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return unsupported(std::string(what) + ": rows of " + std::string(dtype_name(dtype)) +
                       "; the device permutation takes bf16 or f32");
  }
  if (tokens < 0 || top_k < 1 || hidden < 0 || tokens > max_pairs / top_k) {
    return invalid_argument(std::string(what) + ": " + std::to_string(tokens) + " tokens x top-k " +
                            std::to_string(top_k) + " do not fit the permutation (at most " +
                            std::to_string(max_pairs) + " pairs)");
  }
  RagdotMoeRowsParams p{};
  p.row_of = static_cast<const int*>(sorted.row_of);
  p.pair_of = static_cast<const int*>(sorted.pair_of);
  p.pairs = tokens * top_k;
  p.top_k = int(top_k);
  p.hidden = hidden;
  p.elem_bytes = int(dtype_size(dtype));
  p.tokens = tokens;
  return p;
}

template <class Params>
Status launch_rows(CUfunction f, const cuda::Device& device, std::int64_t blocks, Params& p, void* stream,
                   const char* what) {
  cuda::ScopedContext ctx(device.context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  void* args[] = {&p};
  const unsigned grid = unsigned(std::min(blocks, kMaxGrid));
  RAGDOT_CU_RETURN_IF_ERROR(
      cuda::driver()->cuLaunchKernel(f, grid, 1, 1, kRowThreads, 1, 1, 0, static_cast<CUstream>(stream), args, nullptr),
      what);
  return Status::ok();
}

}  // namespace

Status DevicePermutation::gather(const void* x, const float* scale, const DeviceSortBuffers& sorted,
                                 std::int64_t tokens, std::int64_t top_k, std::int64_t hidden, DType dtype, void* rows,
                                 void* stream, const float* pair_weights) const {
  RAGDOT_ASSIGN_OR_RETURN(RagdotMoeRowsParams p, rows_params("gather", sorted, tokens, top_k, hidden, dtype, s_->max_pairs));
  if (scale && pair_weights) return invalid_argument("gather: a per-token scale or per-pair weights, not both");
  if (p.pairs == 0 || hidden == 0) return Status::ok();
  if (!x || !rows || !sorted.pair_of) return invalid_argument("gather: a null device buffer");
  p.x = x;
  p.scale = scale;
  p.pair_scale = pair_weights;
  p.rows = rows;
  if (s_->kernels.gather == RowKernel::kWarps) {
    p.stream_rows = p.pairs * hidden * std::int64_t(dtype_size(dtype)) > kStreamRowsBytes ? 1 : 0;
    return launch_rows(s_->gather_warps, *s_->device, warp_row_blocks(p.pairs, *s_->device), p, stream,
                       "launching ragdot_moe_gather_warps");
  }
  return launch_rows(s_->gather, *s_->device, p.pairs, p, stream, "launching ragdot_moe_gather");
}

Status DevicePermutation::finish_combine(const float* acc, const void* addend, std::int64_t tokens,
                                         std::int64_t hidden, DType dtype, void* y, void* stream) const {
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return unsupported("finish_combine: rows of " + std::string(dtype_name(dtype)) + "; it takes bf16 or f32");
  }
  if (tokens < 0 || hidden < 0) return invalid_argument("finish_combine: a negative size");
  if (tokens * hidden == 0) return Status::ok();
  if (!acc || !y) return invalid_argument("finish_combine: a null device buffer");
  RagdotMoeRowsParams p{};
  p.acc = acc;
  p.addend = addend;
  p.y = y;
  p.tokens = tokens;
  p.hidden = hidden;
  p.elem_bytes = int(dtype_size(dtype));
  // a thread takes 8 elements at a time where rows allow it; a few blocks per SM's worth is plenty
  const std::int64_t blocks = std::min<std::int64_t>((tokens * hidden / 8 + kRowThreads - 1) / kRowThreads + 1,
                                                     std::int64_t(s_->device->multiprocessors) * 8);
  return launch_rows(s_->finish_combine, *s_->device, blocks, p, stream, "launching ragdot_moe_finish_combine");
}

Status DevicePermutation::combine(const void* rows, const float* weights, const DeviceSortBuffers& sorted,
                                  std::int64_t tokens, std::int64_t top_k, std::int64_t hidden, DType dtype,
                                  bool accumulate, void* y, void* stream, const void* addend) const {
  RAGDOT_ASSIGN_OR_RETURN(RagdotMoeRowsParams p, rows_params("combine", sorted, tokens, top_k, hidden, dtype, s_->max_pairs));
  if (tokens == 0 || hidden == 0) return Status::ok();
  if (!rows || !weights || !y || !sorted.row_of) return invalid_argument("combine: a null device buffer");
  p.rows = const_cast<void*>(rows);
  p.weights = weights;
  p.y = y;
  p.accumulate = accumulate ? 1 : 0;
  p.addend = addend;
  return launch_rows(s_->combine, *s_->device, tokens, p, stream, "launching ragdot_moe_combine");
}

Status DevicePermutation::combine_backward(const void* token_rows, const void* sorted_rows, const float* weights,
                                           const DeviceSortBuffers& sorted, std::int64_t tokens, std::int64_t top_k,
                                           std::int64_t hidden, DType dtype, void* scaled, float* dots,
                                           void* stream) const {
  RAGDOT_ASSIGN_OR_RETURN(RagdotMoeRowsParams rp,
                          rows_params("combine_backward", sorted, tokens, top_k, hidden, dtype, s_->max_pairs));
  if (rp.pairs == 0 || hidden == 0 || (!scaled && !dots)) return Status::ok();
  if (!token_rows || !sorted.pair_of || (scaled && !weights) || (dots && !sorted_rows)) {
    return invalid_argument("combine_backward: a null device buffer");
  }
  RagdotMoeRowGradParams p{};
  p.pair_of = rp.pair_of;
  p.rows = rp.pairs;
  p.top_k = rp.top_k;
  p.hidden = rp.hidden;
  p.elem_bytes = rp.elem_bytes;
  p.token_rows = token_rows;
  p.sorted_rows = sorted_rows;
  p.weights = weights;
  p.scaled = scaled;
  p.dots = dots;
  if (s_->kernels.combine_backward == RowKernel::kWarps) {
    return launch_rows(s_->combine_backward_warps, *s_->device, warp_row_blocks(p.rows, *s_->device), p, stream,
                       "launching ragdot_moe_combine_backward_warps");
  }
  return launch_rows(s_->combine_backward, *s_->device, p.rows, p, stream, "launching ragdot_moe_combine_backward");
}

}  // namespace ragdot::moe
