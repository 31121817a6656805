// cuda: the code-generation backend. At plan time it picks a kernel variant for the op and the
// device, generates that kernel's source, compiles it with NVRTC (or finds it in the JIT cache)
// and loads it. At execute time it only fills the kernel's argument block and launches: group
// sizes stay on the device, the kernel's persistent scheduler reads them, nothing is allocated
// and nothing waits for the host, so execute can be captured in a CUDA graph.
//
// Bad group sizes on this device-side path are clamped, not detected: a negative size counts as
// 0 and the running sum is capped at the ragged extent (rows no group covers are zero). With
// PlanOptions::checked (or RAGDOT_CHECKED=1) execute first validates them on the device, reads
// the verdict back and returns an error without writing the output; such plans need a host sync.
//
// An operand whose dims canonicalization cannot express as strides (core::Relayout) is first
// copied into workspace by a relayout kernel on the same stream; the GEMM then reads the copy.
#include <algorithm>
#include <cstring>

#include "backends/cuda/device.hpp"
#include "backends/cuda/loaded_kernel.hpp"
#include "backends/cuda/nvrtc_compiler.hpp"
#include "backends/cuda/tensor_maps.hpp"
#include "backends/cuda/measured_choice.hpp"
#include "core/env.hpp"
#include "planner/builtin_backends.hpp"

extern "C" {
#include "ragdot/params.h"
#include "ragdot/relayout_params.h"
}
#include "ragdot/split.h"
#include "ragdot/tile_order.h"

namespace ragdot::planner {

namespace {

using cuda::Device;
using cuda::KernelVariant;
using cuda::LoadedKernel;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

constexpr std::size_t kCheckFlagBytes = 256;
constexpr std::size_t kTileCounterBytes = 256;
constexpr int kRelayoutThreads = 256;

// One operand's relayout copy: its argument block (pointers filled at execute) and where in the
// workspace the copy goes.
struct RelayoutCopy {
  RagdotRelayoutParams params{};
  std::size_t offset = 0, bytes = 0;
};

Result<std::optional<RelayoutCopy>> relayout_copy(const std::optional<core::Relayout>& r, DType dtype) {
  if (!r) return std::optional<RelayoutCopy>();
  if (r->sizes.size() > RAGDOT_RELAYOUT_MAX_RANK)
    return unsupported("an operand needs a relayout over " + std::to_string(r->sizes.size()) +
                       " dims; the cuda backend copies up to " + std::to_string(RAGDOT_RELAYOUT_MAX_RANK));
  RelayoutCopy c;
  std::memset(&c.params, 0, sizeof c.params);
  c.params.rank = int(r->sizes.size());
  c.params.elem_bytes = int(dtype_size(dtype));
  c.params.elements = r->elements();
  for (std::size_t d = 0; d < r->sizes.size(); ++d) {
    c.params.sizes[d] = r->sizes[d];
    c.params.src_strides[d] = r->src_strides[d];
  }
  c.bytes = std::size_t(c.params.elements) * dtype_size(dtype);
  return std::optional<RelayoutCopy>(c);
}

Result<CUfunction> load_relayout_kernel(const Device& dev) {
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::LoadedModule> m,
                          cuda::load_module(dev, "#include \"ragdot/relayout_copy.cuh\"\n", "ragdot_relayout.cu"));
  CUfunction f = nullptr;
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&f, m->module, "ragdot_relayout_copy"),
                            "cuModuleGetFunction (relayout)");
  return f;
}

const char* origin_name(cuda::CompiledKernel::Origin o) {
  switch (o) {
    case cuda::CompiledKernel::Origin::kCompiled: return "compiled";
    case cuda::CompiledKernel::Origin::kDisk: return "disk-cache";
    case cuda::CompiledKernel::Origin::kMemory: return "memory-cache";
  }
  return "?";
}

RagdotKernelParams static_params(const core::GroupGemmProblem& p) {
  RagdotKernelParams k;
  std::memset(&k, 0, sizeof k);
  k.lhs_m = p.lhs_m, k.lhs_k = p.lhs_k;
  k.rhs_g = p.rhs_g, k.rhs_k = p.rhs_k, k.rhs_n = p.rhs_n;
  k.out_g = p.out_g, k.out_m = p.out_m, k.out_n = p.out_n;
  k.m = p.m, k.n = p.n, k.k = p.k;
  k.ragged_extent = p.ragged_extent;
  k.ragged_unit = p.ragged_unit;
  k.lhs_table_rows = p.lhs_gather_rows.value_or(0);
  k.out_table_rows = p.out_scatter_rows.value_or(0);
  k.num_groups = int(p.num_groups);
  k.computed_groups = int(p.computed_groups);
  k.gs_is_int64 = p.gs_dtype == DType::kI64 ? 1 : 0;
  k.gs_rows_for_check = p.num_groups > 0 ? int(p.gs_elements / p.num_groups) : 0;
  k.outer_rank = int(p.outer.size());
  for (std::size_t i = 0; i < p.outer.size(); ++i) {
    k.outer_size[i] = p.outer[i].size;
    k.outer_lhs[i] = p.outer[i].lhs;
    k.outer_rhs[i] = p.outer[i].rhs;
    k.outer_out[i] = p.outer[i].out;
    k.outer_gs[i] = p.outer[i].gs;
  }
  return k;
}

class CudaPlan final : public detail::BackendPlan {
 public:
  CudaPlan(const core::GroupGemmProblem& p, const Device& dev, const KernelVariant& v,
           std::shared_ptr<const LoadedKernel> k, bool checked, int grid_x, std::int64_t smem,
           std::int64_t raster_bytes, int tile_order, std::optional<RelayoutCopy> lhs_copy,
           std::optional<RelayoutCopy> rhs_copy, CUfunction relayout)
      : dev_(dev), kernel_(std::move(k)), problem_(p), variant_(v), params_(static_params(p)), checked_(checked),
        grid_x_(grid_x),
        grid_y_(int(p.outer_count())), threads_(v.threads()), smem_(smem), has_offset_(p.has_group_offset),
        lhs_copy_(lhs_copy), rhs_copy_(rhs_copy), relayout_(relayout) {
    params_.raster_lhs_elems = raster_bytes / std::int64_t(dtype_size(p.lhs_dtype));
    params_.tile_order = tile_order;
    memory_space = MemorySpace::kDevice;
    graph_safe = !checked;
    needs_host_sync = checked;
    std::size_t ws = checked ? kCheckFlagBytes : 0;
    // the wgmma family hands out tiles in order from a counter, zeroed before each launch; with
    // the last wave split along k, each split tile's consumer warpgroups count their pieces in on
    // counters of their own (at most half a wave of tiles is split), and each piece's partial sums
    // take a slot (at most a wave of pieces: kernels/ragdot/split.h)
    if (v.family == cuda::KernelFamily::kWgmma) {
      tile_counter_offset_ = ws;
      counters_ = v.split_tail ? ragdot_split_counters(grid_x_) : 1;
      ws += std::max(kTileCounterBytes, align256(std::size_t(counters_) * 4));
    }
    if (v.split_tail) {
      split_partials_offset_ = ws;
      ws += align256(std::size_t(grid_x_) * std::size_t(ragdot_split_slot_floats(v.bn)) * sizeof(float));
    }
    for (std::optional<RelayoutCopy>* c : {&lhs_copy_, &rhs_copy_}) {
      if (!*c) continue;
      (*c)->offset = ws;
      ws += align256((*c)->bytes);
    }
    workspace_bytes = ws;
    operand_alignment = v.family == cuda::KernelFamily::kSimt ? 0 : 16;
    const auto& c = *kernel_->compiled;
    char jit[96];
    std::snprintf(jit, sizeof jit, " jit=%s %.1fms", origin_name(c.origin),
                  c.origin == cuda::CompiledKernel::Origin::kCompiled ? c.compile_ms : c.load_ms);
    const char* order = tile_order == RAGDOT_ORDER_MIX    ? " order=mix"
                        : tile_order == RAGDOT_ORDER_AUTO ? " order=auto"
                                                          : "";
    // (a launch parameter, not the kernel's: said here so that plans in blocks read differently)
    const std::string raster = raster_bytes > 0 && !v.strips ? " raster=" + std::to_string(raster_bytes >> 10) : "";
    variant = v.name() + order + raster + " grid=" + std::to_string(grid_x_) + "x" + std::to_string(grid_y_) + jit;
    if (lhs_copy_) variant += " +lhs-copy";
    if (rhs_copy_) variant += " +rhs-copy";
  }

  Status execute(const ExecuteArgs& a) const override {
    const cuda::DriverApi* d = cuda::driver();
    cuda::ScopedContext scope(dev_.context);
    RAGDOT_RETURN_IF_ERROR(scope.status());
    CUstream stream = static_cast<CUstream>(a.stream);
    RagdotKernelParams k = params_;
    k.lhs = a.lhs.data;
    k.rhs = a.rhs.data;
    k.group_sizes = a.group_sizes.data;
    k.group_offset = has_offset_ ? static_cast<const int*>(a.group_offset.data) : nullptr;
    k.out = a.out.data;
    k.lhs_rows = variant_.gather_a ? static_cast<const int*>(a.lhs_rows.data) : nullptr;
    k.out_rows = variant_.scatter_out ? static_cast<const int*>(a.out_rows.data) : nullptr;
    k.row_scales = variant_.scatter_out ? static_cast<const float*>(a.row_scales.data) : nullptr;
    if (checked_) {
      CUdeviceptr flag = reinterpret_cast<CUdeviceptr>(a.workspace.data);
      RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD32Async(flag, 0, 1, stream), "cuMemsetD32Async");
      void* check_args[] = {&k, &flag};
      RAGDOT_CU_RETURN_IF_ERROR(d->cuLaunchKernel(kernel_->check, 1, 1, 1, 256, 1, 1, 0, stream, check_args, nullptr),
                                "launching the group-size check");
      int verdict = 0;
      RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoHAsync(&verdict, flag, sizeof verdict, stream), "cuMemcpyDtoHAsync");
      RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(stream), "cuStreamSynchronize");
      if (verdict & 1) return invalid_argument("group_sizes: a group size is negative");
      if (verdict & 2)
        return invalid_argument("group_sizes: sum exceeds the ragged dimension's size " +
                                std::to_string(params_.ragged_extent));
      if (verdict & 4)
        return invalid_argument("group_offset: out of range [0, " +
                                std::to_string(params_.num_groups - params_.computed_groups) + "]");
    }
    // An empty dimension: nothing to multiply. With k = 0 the output is all zeros (zero bits are
    // +0 in every float dtype), and a scatter table gains nothing; with m, n or a batch dim of 0
    // there is no output. The kernels are not launched: the Hopper family's tensor maps cannot
    // describe an empty operand.
    if (problem_.m == 0 || problem_.n == 0 || problem_.k == 0 || problem_.outer_count() == 0) {
      const std::size_t out_bytes = std::size_t(problem_.out_elements) * dtype_size(problem_.out_dtype);
      if (out_bytes > 0 && !problem_.out_scatter_rows) {
        RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(a.out.data), 0, out_bytes, stream),
                                  "cuMemsetD8Async (the output of an empty product)");
      }
      return Status::ok();
    }
    if (lhs_copy_) RAGDOT_RETURN_IF_ERROR(copy_operand(*lhs_copy_, a.lhs.data, a.workspace.data, stream, &k.lhs));
    if (rhs_copy_) RAGDOT_RETURN_IF_ERROR(copy_operand(*rhs_copy_, a.rhs.data, a.workspace.data, stream, &k.rhs));
    if (tile_counter_offset_) {
      const CUdeviceptr counter = reinterpret_cast<CUdeviceptr>(a.workspace.data) + *tile_counter_offset_;
      RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD32Async(counter, 0, std::size_t(counters_), stream),
                                "cuMemsetD32Async (tile counter)");
      k.tile_counter = reinterpret_cast<int*>(counter);
    }
    if (split_partials_offset_)
      k.split_partials = reinterpret_cast<float*>(static_cast<char*>(a.workspace.data) + *split_partials_offset_);
    cuda::OperandMaps maps{};
    void* args[] = {&k, &maps.a, &maps.b, &maps.out};  // the kernel reads as many as it takes
    if (variant_.family == cuda::KernelFamily::kWgmma)
      RAGDOT_RETURN_IF_ERROR(cuda::encode_operand_maps(variant_, problem_, k.lhs, k.rhs, k.out, maps));
    RAGDOT_CU_RETURN_IF_ERROR(d->cuLaunchKernel(kernel_->gemm, unsigned(grid_x_), unsigned(grid_y_), 1,
                                                unsigned(threads_), 1, 1, unsigned(smem_), stream, args, nullptr),
                              "launching the group GEMM kernel");
    return Status::ok();
  }

 private:
  // Launches one operand's relayout into its workspace slot; *operand then points at the copy.
  Status copy_operand(const RelayoutCopy& c, const void* src, void* workspace, CUstream stream,
                      const void** operand) const {
    RagdotRelayoutParams r = c.params;
    r.src = src;
    r.dst = static_cast<char*>(workspace) + c.offset;
    *operand = r.dst;
    if (r.elements == 0) return Status::ok();
    const std::int64_t blocks = std::clamp<std::int64_t>(ceil_div(r.elements, kRelayoutThreads * 4), 1,
                                                         std::int64_t(dev_.multiprocessors) * 16);
    void* args[] = {&r};
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(relayout_, unsigned(blocks), 1, 1, kRelayoutThreads, 1, 1,
                                                             0, stream, args, nullptr),
                              "launching the relayout copy");
    return Status::ok();
  }

  const Device& dev_;
  std::shared_ptr<const LoadedKernel> kernel_;
  core::GroupGemmProblem problem_;
  KernelVariant variant_;
  RagdotKernelParams params_;
  bool checked_;
  int grid_x_, grid_y_, threads_;
  std::int64_t smem_;
  bool has_offset_;
  std::optional<RelayoutCopy> lhs_copy_, rhs_copy_;
  CUfunction relayout_ = nullptr;
  std::optional<std::size_t> tile_counter_offset_;  // in the workspace
  long long counters_ = 0;                           // int32 counters there, zeroed before each launch
  std::optional<std::size_t> split_partials_offset_;  // in the workspace: split tiles' partial sums
};

// Clusters of a kernel that fit on the device at once, for a kernel launched in CTA pairs (the
// CTAs of a cluster share a GPC, so fewer than half the SMs' worth may fit); `ctas` (the CTAs that
// fit) for one-CTA kernels. Without the driver's cluster query (or if it fails), half of `ctas`:
// clusters past what fits only start late and find the tiles taken, which costs time, never
// correctness.
std::int64_t resident_clusters(const LoadedKernel& k, const KernelVariant& v, std::int64_t smem,
                                       std::int64_t ctas) {
  if (v.cluster == 1) return ctas;
  const cuda::DriverApi* d = cuda::driver();
  if (!d->cuOccupancyMaxActiveClusters) return ctas / v.cluster;
  CUlaunchConfig config{};
  config.gridDimX = unsigned(std::max<std::int64_t>(ctas / v.cluster, 1) * v.cluster);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = unsigned(v.threads());
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = unsigned(smem);
  int clusters = 0;
  if (d->cuOccupancyMaxActiveClusters(&clusters, k.gemm, &config) != CUDA_SUCCESS) return ctas / v.cluster;
  return std::int64_t(clusters);  // 0: the plan says the kernel does not fit
}

// A CTA-pair kernel is launched by plain cuLaunchKernel, which takes its cluster shape from the
// kernel's compile-time __cluster_dims__: make sure the loaded module really carries it, so that a
// toolchain that dropped it fails the plan instead of running pairs as single CTAs.
Status check_cluster_width(const Device& dev, const LoadedKernel& k, const KernelVariant& v) {
  if (v.cluster == 1) return Status::ok();
  cuda::ScopedContext scope(dev.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  int width = 0;
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuFuncGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, k.gemm),
                            "cuFuncGetAttribute(REQUIRED_CLUSTER_WIDTH)");
  if (width != v.cluster)
    return internal_error("kernel " + v.name() + " was built for clusters of " + std::to_string(v.cluster) +
                          " CTAs but its module says " + std::to_string(width));
  return Status::ok();
}

// The plan of one variant: its kernel loaded, its persistent grid sized, its copies laid out.
Result<std::unique_ptr<CudaPlan>> build_plan(const core::GroupGemmProblem& p, const Device& device,
                                             const KernelVariant& v, const cuda::VariantSpec& spec, bool checked) {
  const Device* dev = &device;
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedKernel> k, cuda::load_kernel(*dev, v));
  const std::int64_t smem = v.dynamic_smem_bytes(p.num_groups, p.computed_groups);
  RAGDOT_RETURN_IF_ERROR(cuda::reserve_dynamic_smem(*dev, *k, smem));
  RAGDOT_RETURN_IF_ERROR(check_cluster_width(*dev, *k, v));

  // Persistent grid: as many CTAs (clusters: `resident` counts them) as fit on the device at
  // once, never more than there can be tiles (a cluster's tile has 2 bm rows, 2 bn columns or both).
  int per_sm = 0;
  std::int64_t resident = 0;
  {
    cuda::ScopedContext scope(dev->context);
    RAGDOT_RETURN_IF_ERROR(scope.status());
    const CUresult r =
        cuda::driver()->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->gemm, v.threads(), size_t(smem));
    // a cluster kernel's fit is the cluster query's to say (resident_clusters); its CTAs take
    // most of an SM's shared memory, one per SM
    if (r != CUDA_SUCCESS && v.cluster > 1) per_sm = 1;
    else RAGDOT_CU_RETURN_IF_ERROR(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    resident = std::int64_t(per_sm) * dev->multiprocessors;
    resident = resident_clusters(*k, v, smem, resident);
  }
  if (per_sm == 0 || resident == 0) return unsupported("kernel " + v.name() + " does not fit on this GPU");
  const std::int64_t tile_rows = std::int64_t(v.bm) * (v.pairs_along_m() ? 2 : 1);
  const std::int64_t n_tiles = ceil_div(p.n, std::int64_t(v.bn) * (v.pairs_along_n() ? 2 : 1));
  std::int64_t max_tiles = 1;
  if (v.mode == 1) max_tiles = (ceil_div(p.m, tile_rows) + p.computed_groups + 2) * n_tiles;
  if (v.mode == 2) max_tiles = p.computed_groups * ceil_div(p.m, tile_rows) * n_tiles;
  if (v.mode == 3) max_tiles = ceil_div(p.m, v.bm) * n_tiles;
  // with the last wave split along k, idle CTAs take pieces of the tiles: up to that many more
  // (where k has the steps for two pieces at least)
  if (v.split_tail && ceil_div(p.k, v.bk) >= 2 * RAGDOT_SPLIT_MIN_STEPS) max_tiles *= RAGDOT_SPLIT_MAX_PIECES;
  const std::int64_t outer = std::max<std::int64_t>(p.outer_count(), 1);
  std::int64_t clusters = std::clamp<std::int64_t>(ceil_div(resident, outer), 1, std::max<std::int64_t>(max_tiles, 1));
  if (spec.ctas) clusters = std::min<std::int64_t>(clusters, std::max(*spec.ctas / v.cluster, 1));
  const int grid_x = v.cluster * int(clusters);
  RAGDOT_ASSIGN_OR_RETURN(std::optional<RelayoutCopy> lhs_copy, relayout_copy(p.lhs_relayout, p.lhs_dtype));
  RAGDOT_ASSIGN_OR_RETURN(std::optional<RelayoutCopy> rhs_copy, relayout_copy(p.rhs_relayout, p.rhs_dtype));
  CUfunction relayout = nullptr;
  if (lhs_copy || rhs_copy) {
    RAGDOT_ASSIGN_OR_RETURN(relayout, load_relayout_kernel(*dev));
  }
  return std::make_unique<CudaPlan>(p, *dev, v, std::move(k), checked, grid_x, smem, spec.raster_bytes,
                                    cuda::tile_order(v, p, spec.tile_order), lhs_copy, rhs_copy, relayout);
}

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  bool gathers_lhs_rows() const override { return true; }  // choose_variant says where it cannot
  bool fuses_swiglu() const override { return true; }      // the same
  bool scatters_out_rows() const override { return true; }  // the same
  Status available() const override {
    std::string why;
    if (cuda::device_count(&why) == 0) return unavailable(why);
    if (cuda::nvrtc_version(&why).empty()) return unavailable(why);
    return Status::ok();
  }
  std::string describe() const override {
    auto dev = cuda::device(0);
    return (dev.ok() ? (*dev)->describe() : std::string("no GPU")) + ", NVRTC " + cuda::nvrtc_version();
  }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    RAGDOT_RETURN_IF_ERROR(available());
    const auto& p = r.problem;
    RAGDOT_ASSIGN_OR_RETURN(const Device* dev, cuda::device(r.options.device));
    // the tuning override, parsed once: it picks the decode family, the variant and the tile order
    const std::optional<std::string> override_text = env::cuda_variant();
    RAGDOT_ASSIGN_OR_RETURN(const cuda::VariantSpec spec, cuda::parse_variant_spec(override_text.value_or("")));
    RAGDOT_ASSIGN_OR_RETURN(KernelVariant v, cuda::choose_variant(p, dev->traits, spec.small_groups_on_wgmma));
    std::string measured;  // what measuring chose, for the plan's description
    if (override_text) {
      // an override names its variant: it is not measured against others. Stage counts that
      // depend on the scheduler table are those of the compiled table that holds this problem's
      // (as for measured candidates), so that a measured winner pinned here is the same kernel.
      RAGDOT_ASSIGN_OR_RETURN(v, cuda::override_variant(v, spec, dev->traits,
                                                        cuda::compiled_table_for(p.num_groups + p.computed_groups)));
    } else if (r.options.effort == PlanningEffort::kMeasure) {
      auto make = [&](const KernelVariant& candidate) -> Result<std::unique_ptr<detail::BackendPlan>> {
        RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<CudaPlan> plan, build_plan(p, *dev, candidate, spec, /*checked=*/false));
        return std::unique_ptr<detail::BackendPlan>(std::move(plan));
      };
      RAGDOT_ASSIGN_OR_RETURN(cuda::MeasuredChoice m, cuda::measured_variant(p, *dev, v, r.options.measure_group_sizes, make));
      v = m.variant;
      measured = m.description;
    }
    RAGDOT_ASSIGN_OR_RETURN(std::unique_ptr<CudaPlan> plan, build_plan(p, *dev, v, spec, r.options.checked || env::checked()));
    if (!measured.empty()) plan->variant += " " + measured;
    return std::unique_ptr<detail::BackendPlan>(std::move(plan));
  }
};

}  // namespace

const Backend& cuda_backend() {
  static const CudaBackend b;
  return b;
}

}  // namespace ragdot::planner
