// padded on the GPU: the capacity-padded baseline beside the Group-GEMM backends. Rows are
// scattered into [groups, capacity, k] by a device kernel (padding rows zero), every group is
// multiplied at the full capacity by one cublasGemmStridedBatchedEx, and the kept rows are gathered
// back (mode 1; rows no group covers and dropped rows are zero). Mode 2 pads both operands along
// the ragged k and writes dW directly. Capacity: the largest group (dropless), which needs the
// group sizes on the host, or ceil(factor * rows / groups) from a capacity factor, which does not:
// those plans need no host sync and may be captured in a CUDA graph, unless execute is asked for a
// report (the dropped-row count is counted on the host).
//
// Registered under the name "padded" for device memory: PlanOptions::memory_space = kDevice picks
// it, host memory keeps the CPU baseline.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "backends/cublas/cublas_handle.hpp"
#include "backends/cublas/gemm_list.hpp"
#include "backends/cublas/group_size_bridge.hpp"
#include "backends/cuda/loaded_kernel.hpp"
#include "backends/cuda/nvrtc_compiler.hpp"
#include "planner/builtin_backends.hpp"
#include "planner/padded_capacity.hpp"

extern "C" {
#include "ragdot/padded_params.h"
}

namespace ragdot::planner {

namespace {

constexpr int kCopyThreads = 256;
constexpr std::int64_t kRowsPerBlock = 4;
constexpr std::int64_t kMaxGridX = 65535;
constexpr std::int64_t kMaxLocalGroups = 4096;  // the copies keep the group starts in shared memory

struct CopyKernels {
  CUfunction scatter = nullptr, gather = nullptr;
};

Result<CopyKernels> load_copy_kernels(const cuda::Device& dev) {
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::LoadedModule> m,
                          cuda::load_module(dev, "#include \"ragdot/padded_copy.cuh\"\n", "ragdot_padded.cu"));
  CopyKernels k;
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&k.scatter, m->module, "ragdot_padded_scatter"),
                            "cuModuleGetFunction (scatter)");
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&k.gather, m->module, "ragdot_padded_gather"),
                            "cuModuleGetFunction (gather)");
  return k;
}

std::size_t align_up(std::size_t x) { return (x + 255) / 256 * 256; }

// The batched GEMM at capacity `cap`, in cuBLAS's terms, with the batch strides of its operands.
struct BatchedGemm {
  cublas::ColumnMajorGemm g;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

std::optional<BatchedGemm> batched_gemm(const core::GroupGemmProblem& p, std::int64_t cap) {
  BatchedGemm b;
  std::optional<cublas::ColumnMajorGemm> g;
  std::int64_t lhs_stride = 0, rhs_stride = 0;
  if (p.mode == RaggedMode::kNonContracting) {
    // Y[j] (cap x n, dense) = X[j] (cap x k, dense) * W[j]
    g = cublas::map_gemm(cap, p.n, p.k, {p.k, 1}, {p.rhs_k, p.rhs_n}, {p.n, 1});
    lhs_stride = cap * p.k, rhs_stride = p.rhs_g, b.stride_c = cap * p.n;
  } else {
    // dW[j] = X[j]^T (X[j]: cap x m, dense) * D[j] (cap x n, dense)
    g = cublas::map_gemm(p.m, p.n, cap, {1, p.m}, {p.n, 1}, {p.out_m, p.out_n});
    lhs_stride = cap * p.m, rhs_stride = cap * p.n, b.stride_c = p.out_g;
  }
  if (!g) return std::nullopt;
  b.g = *g;
  b.stride_a = g->a_source == cublas::Source::kLhs ? lhs_stride : rhs_stride;
  b.stride_b = g->b_source == cublas::Source::kLhs ? lhs_stride : rhs_stride;
  return b;
}

class PaddedGpuPlan final : public detail::BackendPlan {
 public:
  PaddedGpuPlan(const core::GroupGemmProblem& p, const cuda::Device& dev, CopyKernels kernels, PaddedCapacity capacity,
                cudaDataType_t in, cudaDataType_t out, std::unique_ptr<cublas::Handle> handle,
                std::unique_ptr<cublas::GroupSizeBridge> bridge)
      : dev_(dev), p_(p), kernels_(kernels), capacity_(capacity), in_(in), out_(out), handle_(std::move(handle)),
        bridge_(std::move(bridge)) {
    memory_space = MemorySpace::kDevice;
    const bool dropless = !capacity.factor;
    needs_host_sync = dropless;
    graph_safe = !dropless;
    const std::int64_t G = p.computed_groups, cap = capacity.max_capacity;
    const bool mode1 = p.mode == RaggedMode::kNonContracting;
    x_bytes_ = align_up(std::size_t(G * cap * (mode1 ? p.k : p.m)) * dtype_size(p.lhs_dtype));
    const std::size_t y_bytes = std::size_t(G * cap * p.n) * dtype_size(mode1 ? p.out_dtype : p.rhs_dtype);
    workspace_bytes = x_bytes_ + align_up(y_bytes);
    static_cap_ = capacity.factor ? std::min(capacity_for_factor(*capacity.factor, padded_rows(p), G), cap) : 0;
    variant = std::string(dropless ? "dropless" : "capacity-factor") + " max_capacity=" + std::to_string(cap) +
              " scatter+cublasGemmStridedBatchedEx" + (mode1 ? "+gather" : "");
  }

  Status execute(const ExecuteArgs& a) const override {
    cublas::ExecuteScope scope(mu_, dev_.context);
    RAGDOT_RETURN_IF_ERROR(scope.context.status());
    CUstream stream = static_cast<CUstream>(a.stream);
    const bool fetch = !capacity_.factor || a.report;
    std::int64_t cap = static_cap_, dropped = 0;
    if (fetch) {
      RAGDOT_RETURN_IF_ERROR(bridge_->fetch(a, stream));
      const std::int64_t* s = bridge_->starts() + bridge_->group_offset();
      std::int64_t largest = 0;
      for (std::int64_t j = 0; j < p_.computed_groups; ++j) largest = std::max(largest, (s[j + 1] - s[j]) * p_.ragged_unit);
      if (!capacity_.factor) {
        if (largest > capacity_.max_capacity) {
          return invalid_argument("the largest group has " + std::to_string(largest) +
                                  " rows, more than the plan's padded_max_group_rows " +
                                  std::to_string(capacity_.max_capacity));
        }
        cap = largest;
      }
      for (std::int64_t j = 0; j < p_.computed_groups; ++j) dropped += std::max<std::int64_t>((s[j + 1] - s[j]) * p_.ragged_unit - cap, 0);
    }
    if (a.report) {
      a.report->host_bridge_ms = cublas::elapsed_ms(scope.start);
      a.report->dropped_rows = dropped;
      a.report->capacity = cap;
    }
    return p_.mode == RaggedMode::kNonContracting ? forward(a, cap, stream) : weight_gradient(a, cap, stream);
  }

 private:
  RagdotPaddedParams copy_params(const ExecuteArgs& a, std::int64_t cap) const {
    RagdotPaddedParams k{};
    k.group_sizes = a.group_sizes.data;
    k.group_offset = p_.has_group_offset ? static_cast<const int*>(a.group_offset.data) : nullptr;
    k.gs_is_int64 = p_.gs_dtype == DType::kI64 ? 1 : 0;
    k.num_groups = int(p_.num_groups);
    k.local_groups = int(p_.computed_groups);
    k.extent = p_.ragged_extent;
    k.unit = p_.ragged_unit;
    k.capacity = cap;
    return k;
  }

  Status launch(CUfunction f, std::int64_t work_rows, unsigned grid_y, RagdotPaddedParams& k, CUstream stream) const {
    const unsigned grid_x = unsigned(std::clamp<std::int64_t>((work_rows + kRowsPerBlock - 1) / kRowsPerBlock, 1, kMaxGridX));
    const unsigned smem = unsigned(std::size_t(p_.computed_groups + 1) * sizeof(long long));
    void* args[] = {&k};
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(f, grid_x, grid_y, 1, kCopyThreads, 1, 1, smem, stream,
                                                             args, nullptr),
                              "launching a padded copy kernel");
    return Status::ok();
  }

  // Rows of the ragged operand `src` (row and column strides) into the dense [groups, cap, cols] `dst`.
  Status scatter(const ExecuteArgs& a, std::int64_t cap, const void* src, std::int64_t src_row, std::int64_t src_col,
                 std::int64_t cols, DType dtype, void* dst, CUstream stream) const {
    RagdotPaddedParams k = copy_params(a, cap);
    k.rows = padded_rows(p_), k.cols = cols, k.elem_bytes = int(dtype_size(dtype));
    k.src = src, k.src_row = src_row, k.src_col = src_col;
    k.dst = dst, k.dst_row = cols, k.dst_col = 1;
    return launch(kernels_.scatter, cap, unsigned(p_.computed_groups), k, stream);
  }

  Status gemm(const ExecuteArgs& a, std::int64_t cap, const void* lhs, const void* rhs, void* out) const {
    auto b = batched_gemm(p_, cap);
    if (!b) return internal_error("padded: the batched GEMM has strides cuBLAS cannot read in place");
    const cublas::ColumnMajorGemm& g = b->g;
    const void* A = g.a_source == cublas::Source::kLhs ? lhs : rhs;
    const void* B = g.b_source == cublas::Source::kLhs ? lhs : rhs;
    const float one = 1.0f, zero = 0.0f;
    RAGDOT_RETURN_IF_ERROR(handle_->set_stream(static_cast<CUstream>(a.stream)));
    RAGDOT_CUBLAS_RETURN_IF_ERROR(
        cublas::library()->cublasGemmStridedBatchedEx_64(
            handle_->get(), g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n,
            g.k, &one, A, in_, g.lda, b->stride_a, B, in_, g.ldb, b->stride_b, &zero, out, out_, g.ldc, b->stride_c,
            p_.computed_groups, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
    return Status::ok();
  }

  Status forward(const ExecuteArgs& a, std::int64_t cap, CUstream stream) const {
    char* x = static_cast<char*>(a.workspace.data);
    char* y = x + x_bytes_;
    if (cap > 0 && p_.computed_groups > 0 && p_.n > 0) {
      RAGDOT_RETURN_IF_ERROR(scatter(a, cap, a.lhs.data, p_.lhs_m, p_.lhs_k, p_.k, p_.lhs_dtype, x, stream));
      RAGDOT_RETURN_IF_ERROR(gemm(a, cap, x, a.rhs.data, y));
    }
    if (p_.m == 0 || p_.n == 0) return Status::ok();
    // every output row: a kept row of its group, else zero
    RagdotPaddedParams k = copy_params(a, cap);
    k.rows = p_.m, k.cols = p_.n, k.elem_bytes = int(dtype_size(p_.out_dtype));
    k.src = y, k.src_row = p_.n, k.src_col = 1;
    k.dst = a.out.data, k.dst_row = p_.out_m, k.dst_col = p_.out_n;
    return launch(kernels_.gather, p_.m, 1, k, stream);
  }

  Status weight_gradient(const ExecuteArgs& a, std::int64_t cap, CUstream stream) const {
    const std::size_t out_bytes = std::size_t(p_.out_elements) * dtype_size(p_.out_dtype);
    if (cap == 0 || p_.computed_groups == 0) {
      // every group empty (or dropped): dW is zero
      if (out_bytes == 0) return Status::ok();
      RAGDOT_CU_RETURN_IF_ERROR(
          cuda::driver()->cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(a.out.data), 0, out_bytes, stream),
          "cuMemsetD8Async");
      return Status::ok();
    }
    if (p_.m == 0 || p_.n == 0) return Status::ok();
    char* x = static_cast<char*>(a.workspace.data);
    char* dy = x + x_bytes_;
    RAGDOT_RETURN_IF_ERROR(scatter(a, cap, a.lhs.data, p_.lhs_k, p_.lhs_m, p_.m, p_.lhs_dtype, x, stream));
    RAGDOT_RETURN_IF_ERROR(scatter(a, cap, a.rhs.data, p_.rhs_k, p_.rhs_n, p_.n, p_.rhs_dtype, dy, stream));
    return gemm(a, cap, x, dy, a.out.data);
  }

  const cuda::Device& dev_;
  core::GroupGemmProblem p_;
  CopyKernels kernels_;
  PaddedCapacity capacity_;
  cudaDataType_t in_, out_;
  std::unique_ptr<cublas::Handle> handle_;
  std::unique_ptr<cublas::GroupSizeBridge> bridge_;
  std::size_t x_bytes_ = 0;
  std::int64_t static_cap_ = 0;
  mutable std::mutex mu_;
};

class PaddedGpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "padded"; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  bool automatic() const override { return false; }
  Status available() const override {
    RAGDOT_RETURN_IF_ERROR(cublas::cublas_available());
    std::string why;
    if (cuda::nvrtc_version(&why).empty()) return unavailable(why);
    return Status::ok();
  }
  std::string describe() const override {
    return "capacity-padded baseline on the GPU: scatter kernel, cuBLAS strided batched GEMM, gather (only when "
           "named, for device memory)";
  }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    RAGDOT_RETURN_IF_ERROR(available());
    const auto& p = r.problem;
    RAGDOT_ASSIGN_OR_RETURN(PaddedCapacity capacity, padded_capacity(p, r.options));
    cudaDataType_t in, out;
    RAGDOT_RETURN_IF_ERROR(cublas::gemm_data_types(p, in, out));
    if (p.computed_groups > kMaxLocalGroups) return unsupported("the GPU padded baseline takes at most 4096 groups");
    for (std::int64_t cap : {std::int64_t(1), capacity.max_capacity}) {
      if (cap > 0 && !batched_gemm(p, cap)) return unsupported("padded: an operand is contiguous along neither dim");
    }
    RAGDOT_ASSIGN_OR_RETURN(const cuda::Device* dev, cuda::device(r.options.device));
    RAGDOT_ASSIGN_OR_RETURN(CopyKernels kernels, load_copy_kernels(*dev));
    RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<cublas::Handle> handle, cublas::Handle::create(*dev));
    RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<cublas::GroupSizeBridge> bridge, cublas::GroupSizeBridge::create(*dev, p, 0));
    return std::unique_ptr<detail::BackendPlan>(
        new PaddedGpuPlan(p, *dev, kernels, capacity, in, out, std::move(handle), std::move(bridge)));
  }
};

}  // namespace

const Backend& padded_gpu_backend() {
  static const PaddedGpuBackend b;
  return b;
}

}  // namespace ragdot::planner
