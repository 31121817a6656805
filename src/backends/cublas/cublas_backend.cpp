// cublas: the vendor-library backend. Every mode runs through cublasGemmGroupedBatchedEx, which in
// cuBLAS 13.1 takes the per-group shapes as host arrays and the operand pointers as device arrays.
// The plan holds everything static (handle, pinned memory, the shape arrays' storage, events).
// Execute bridges run time and plan time: it copies the group sizes to pinned host memory on the
// caller's stream and waits for an event, builds the per-group arrays in the plan's storage,
// uploads the pointer arrays into the workspace asynchronously and calls cuBLAS. Rows no group
// covers (mode 1) and empty groups' blocks (mode 2) are zeroed with asynchronous 2D memsets.
//
// So its plans need a host sync and are not graph-safe (mode 3 needs no group sizes, hence no
// sync). Executes of one plan are serialized by a mutex: the plan's host storage is reused, and
// an execute waits for the previous upload from it to finish before overwriting it.
#include <chrono>
#include <mutex>

#include "backends/cublas/cublas_handle.hpp"
#include "backends/cublas/gemm_list.hpp"
#include "backends/cublas/group_size_bridge.hpp"
#include "backends/cublas/grouped_lt_gate.hpp"
#include "backends/cublas/grouped_probe.hpp"
#include "backends/cublas/plan_traits.hpp"
#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

namespace {

using cublas::GemmCall;

constexpr std::size_t kPointerArrays = 3;  // A, B, C

// Per-execute host arrays, sized at plan time; cuBLAS reads them during the call.
struct HostArrays {
  cublas::GemmList list;
  std::vector<cublasOperation_t> trans_a, trans_b;
  std::vector<int> m, n, k, lda, ldb, ldc, group_size;
  std::vector<float> alpha, beta;
  explicit HostArrays(const core::GroupGemmProblem& p) {
    const std::size_t gemms = std::size_t(cublas::max_gemms(p));
    list.gemms.reserve(gemms);
    list.zeros.reserve(std::size_t(cublas::max_zero_blocks(p)));
    for (auto* v : {&m, &n, &k, &lda, &ldb, &ldc}) v->resize(gemms);
    trans_a.resize(gemms);
    trans_b.resize(gemms);
    group_size.assign(gemms, 1);  // every group GEMM has its own shape: one problem per cuBLAS group
    alpha.assign(gemms, 1.0f);
    beta.assign(gemms, 0.0f);
  }
};

cublasOperation_t op_of(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublas::GroupedLtQuery gate_query(const cuda::Device& dev) {
  cublas::GroupedLtQuery q;
  q.header_version = CUBLAS_VERSION;
  q.runtime_version = cublas::library()->version;
  q.cc_major = dev.traits.cc_major;
  q.cc_minor = dev.traits.cc_minor;
  q.path_built = cublas::grouped_lt_path_built();
  return q;
}

class CublasPlan final : public detail::BackendPlan {
 public:
  CublasPlan(const core::GroupGemmProblem& p, const cuda::Device& dev, GemmCall call, cudaDataType_t in,
             cudaDataType_t out, std::unique_ptr<cublas::Handle> handle, std::unique_ptr<cublas::GroupSizeBridge> bridge,
             const cublas::PlanTraits& traits)
      : dev_(dev), p_(p), call_(call), in_(in), out_(out), handle_(std::move(handle)), bridge_(std::move(bridge)),
        arrays_(std::make_unique<HostArrays>(p)), capacity_(std::size_t(cublas::max_gemms(p))) {
    memory_space = MemorySpace::kDevice;
    needs_host_sync = traits.needs_host_sync;
    graph_safe = traits.graph_safe;
    variant = traits.variant;
    workspace_bytes = call == GemmCall::kGroupedBatched ? pointer_bytes() : 0;
  }

  static std::size_t pointer_bytes(const core::GroupGemmProblem& p) {
    return kPointerArrays * std::size_t(cublas::max_gemms(p)) * sizeof(void*);
  }

  Status execute(const ExecuteArgs& a) const override {
    cublas::ExecuteScope scope(mu_, dev_.context);
    RAGDOT_RETURN_IF_ERROR(scope.context.status());
    CUstream stream = static_cast<CUstream>(a.stream);
    const std::int64_t* starts = nullptr;
    std::int64_t offset = 0;
    if (p_.mode != RaggedMode::kBatch) {
      RAGDOT_RETURN_IF_ERROR(bridge_->fetch(a, stream));
      starts = bridge_->starts();
      offset = bridge_->group_offset();
    }
    HostArrays& h = *arrays_;
    RAGDOT_RETURN_IF_ERROR(cublas::build_gemm_list(p_, starts, offset, h.list));
    RAGDOT_RETURN_IF_ERROR(bridge_->wait_staging());
    fill_arrays(a, h);
    const std::size_t count = h.list.gemms.size();
    if (call_ == GemmCall::kGroupedBatched && count > 0) {
      RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(a.workspace.data),
                                                                  bridge_->staging(), pointer_bytes(), stream),
                                "cuMemcpyHtoDAsync (pointer arrays)");
      RAGDOT_RETURN_IF_ERROR(bridge_->staged(stream));
    }
    if (a.report) a.report->host_bridge_ms = cublas::elapsed_ms(scope.start);
    RAGDOT_RETURN_IF_ERROR(zero_blocks(a, h, stream));
    if (count == 0) return Status::ok();
    RAGDOT_RETURN_IF_ERROR(handle_->set_stream(stream));
    return call_ == GemmCall::kGroupedBatched ? grouped(a, h, count) : loop(h, count);
  }

 private:
  std::size_t pointer_bytes() const { return kPointerArrays * capacity_ * sizeof(void*); }
  void** staged_pointers() const { return static_cast<void**>(bridge_->staging()); }

  void fill_arrays(const ExecuteArgs& a, HostArrays& h) const {
    char* const sources[2] = {static_cast<char*>(const_cast<void*>(a.lhs.data)),
                              static_cast<char*>(const_cast<void*>(a.rhs.data))};
    const std::size_t sizes[2] = {dtype_size(p_.lhs_dtype), dtype_size(p_.rhs_dtype)};
    const std::size_t oes = dtype_size(p_.out_dtype);
    void** ptrs = staged_pointers();
    for (std::size_t i = 0; i < h.list.gemms.size(); ++i) {
      const cublas::ColumnMajorGemm& g = h.list.gemms[i];
      const int as = int(g.a_source), bs = int(g.b_source);
      h.trans_a[i] = op_of(g.trans_a);
      h.trans_b[i] = op_of(g.trans_b);
      h.m[i] = int(g.m), h.n[i] = int(g.n), h.k[i] = int(g.k);
      h.lda[i] = int(g.lda), h.ldb[i] = int(g.ldb), h.ldc[i] = int(g.ldc);
      ptrs[i] = sources[as] + std::size_t(g.a_offset) * sizes[as];
      ptrs[capacity_ + i] = sources[bs] + std::size_t(g.b_offset) * sizes[bs];
      ptrs[2 * capacity_ + i] = static_cast<char*>(a.out.data) + std::size_t(g.c_offset) * oes;
    }
  }

  Status zero_blocks(const ExecuteArgs& a, const HostArrays& h, CUstream stream) const {
    const std::size_t oes = dtype_size(p_.out_dtype);
    const auto out = reinterpret_cast<CUdeviceptr>(a.out.data);
    for (const cublas::ZeroBlock& z : h.list.zeros) {
      auto r = cublas::pitched_region(z);
      if (!r) return internal_error("cublas: a block to zero is contiguous along neither dim");
      if (r->width == 0 || r->height == 0) continue;
      RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemsetD2D8Async(out + std::size_t(r->offset) * oes,
                                                                 std::size_t(r->pitch) * oes, 0,
                                                                 std::size_t(r->width) * oes, std::size_t(r->height),
                                                                 stream),
                                "cuMemsetD2D8Async (zero rows)");
    }
    return Status::ok();
  }

  Status grouped(const ExecuteArgs& a, const HostArrays& h, std::size_t count) const {
    auto* dev_ptrs = static_cast<void**>(a.workspace.data);  // device arrays, uploaded above
    RAGDOT_CUBLAS_RETURN_IF_ERROR(
        cublas::library()->cublasGemmGroupedBatchedEx(
            handle_->get(), h.trans_a.data(), h.trans_b.data(), h.m.data(), h.n.data(), h.k.data(), h.alpha.data(),
            const_cast<const void* const*>(dev_ptrs), in_, h.lda.data(),
            const_cast<const void* const*>(dev_ptrs + capacity_), in_, h.ldb.data(), h.beta.data(),
            dev_ptrs + 2 * capacity_, out_, h.ldc.data(), int(count), h.group_size.data(), CUBLAS_COMPUTE_32F),
        "cublasGemmGroupedBatchedEx");
    return Status::ok();
  }

  Status loop(const HostArrays& h, std::size_t count) const {
    void** ptrs = staged_pointers();  // host values: cublasGemmEx takes the pointers themselves
    const float one = 1.0f, zero = 0.0f;
    for (std::size_t i = 0; i < count; ++i) {
      RAGDOT_CUBLAS_RETURN_IF_ERROR(
          cublas::library()->cublasGemmEx_64(handle_->get(), h.trans_a[i], h.trans_b[i], h.m[i], h.n[i], h.k[i], &one,
                                             ptrs[i], in_, h.lda[i], ptrs[capacity_ + i], in_, h.ldb[i], &zero,
                                             ptrs[2 * capacity_ + i], out_, h.ldc[i], CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    }
    return Status::ok();
  }

  const cuda::Device& dev_;
  core::GroupGemmProblem p_;
  GemmCall call_;
  cudaDataType_t in_, out_;
  std::unique_ptr<cublas::Handle> handle_;
  std::unique_ptr<cublas::GroupSizeBridge> bridge_;
  std::unique_ptr<HostArrays> arrays_;  // reused by every execute, under mu_
  std::size_t capacity_;
  mutable std::mutex mu_;
};

class CublasBackend final : public Backend {
 public:
  std::string_view name() const override { return "cublas"; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  Status available() const override { return cublas::cublas_available(); }
  std::string describe() const override {
    auto dev = cuda::device(0);
    if (!dev.ok()) return "no GPU";
    const cublas::CublasApi* b = cublas::library();
    const Status gate = cublas::grouped_lt_device_shapes(gate_query(**dev));
    return (*dev)->describe() + ", cuBLAS " + cublas::version_string(b->version) + ", device-shape grouped matmul: " +
           (gate.is_ok() ? std::string("yes") : gate.message());
  }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    RAGDOT_RETURN_IF_ERROR(available());
    const auto& p = r.problem;
    cudaDataType_t in, out;
    RAGDOT_RETURN_IF_ERROR(cublas::gemm_data_types(p, in, out));
    RAGDOT_RETURN_IF_ERROR(cublas::check_mappable(p));
    RAGDOT_ASSIGN_OR_RETURN(const cuda::Device* dev, cuda::device(r.options.device));
    RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<cublas::Handle> handle, cublas::Handle::create(*dev));
    RAGDOT_ASSIGN_OR_RETURN(bool grouped, cublas::grouped_takes(*dev, *handle, in, out));
    const GemmCall call = grouped ? GemmCall::kGroupedBatched : GemmCall::kGemmLoop;
    RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<cublas::GroupSizeBridge> bridge,
                            cublas::GroupSizeBridge::create(*dev, p, CublasPlan::pointer_bytes(p)));
    const auto traits = cublas::plan_traits(p.mode, call, cublas::grouped_lt_device_shapes(gate_query(*dev)));
    return std::unique_ptr<detail::BackendPlan>(
        new CublasPlan(p, *dev, call, in, out, std::move(handle), std::move(bridge), traits));
  }
};

}  // namespace

const Backend& cublas_backend() {
  static const CublasBackend b;
  return b;
}

}  // namespace ragdot::planner
