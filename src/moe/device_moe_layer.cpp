// DeviceMoeLayer: the MoE layer of moe_layer.cpp on a GPU. Router logits (planned one-group
// ragged dot) -> router kernel -> stable counting sort by expert (group sizes on the device) ->
// gather -> up ragged dot -> gated activation (SwiGLU or GeGLU) -> down ragged dot -> shared
// experts -> combine on top of the shared output; backward in reverse. Every buffer lives in one
// allocation made by create; the plans share one workspace, since they run one after another on
// the caller's stream. With
// expert parallelism the routed experts' three steps become: exchange of the per-expert counts,
// the exchange's plan (one host sync), dispatch of the sorted rows to their experts' ranks, the
// local experts' up, activation and down on the rows received, and the way back.
//
// With DeviceMoeOptions::gather_in_up_gemm (by default where it pays, gathers_in_up_gemm), where
// the cuda backend can (Hopper; not Llama-4, whose rows are scaled, nor expert parallelism, which
// sends the sorted rows), the up ragged dot reads each sorted row straight from x through the
// sort's token index (PlanOptions::lhs_gather_rows) and the gather kernel does not run in
// forward. Backward then gathers the rows itself for the up projection's weight gradient.
//
// With DeviceMoeOptions::swiglu_in_up_gemm, where the cuda backend can (Hopper, no expert
// parallelism), forward's up ragged dot writes the SwiGLU activations itself
// (PlanOptions::swiglu_epilogue), and the product the SwiGLU backward needs is computed again
// at the start of the backward's up-projection steps.
//
// With DeviceMoeOptions::combine_in_down_gemm (Hopper, no expert parallelism), forward's down
// ragged dot adds each expert row, times its combine weight (the sort's weight_of), into its
// token's row of an f32 sum (PlanOptions::out_scatter_rows, through the sort's token_of), and
// finish_combine rounds the sums plus the shared experts' output into y. Backward then runs the
// down projection again for the expert rows the combine's backward reads.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "moe/device_moe_ops.hpp"
#include "moe/device_permutation.hpp"
#include "moe/host_gemm.hpp"
#include "moe/layer_config.hpp"
#include "planner/padded_capacity.hpp"
#include "ragdot/ep_transport.hpp"
#include "ragdot/moe_device.hpp"

namespace ragdot::moe {

using workloads::RouterKind;

namespace {

constexpr DType kAct = DType::kBF16;  // activations, expert weights and their gradients
constexpr std::size_t kActBytes = 2;
constexpr std::size_t kAlign = 256;

// The layer's ragged dots: the router's three (RouterGemm), then the routed experts' six and one
// shared expert's six (ExpertFfnGemm each).
constexpr int kRouted = 3;
constexpr int kShared = kRouted + 6;
constexpr int kGemmCount = kShared + 6;

// "router logits", "routed up", "shared d_w_down", ...
std::string layer_gemm_name(int i) {
  static const char* router[] = {"router logits", "router d_x", "router d_w"};
  if (i < kRouted) return router[i];
  return i < kShared ? std::string("routed ") + expert_ffn_gemm_name(i - kRouted)
                     : std::string("shared ") + expert_ffn_gemm_name(i - kShared);
}

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
const void* offset(const void* p, std::int64_t elements) {
  return p ? static_cast<const char*>(p) + std::size_t(elements) * kActBytes : nullptr;
}
void* offset(void* p, std::int64_t elements) {
  return p ? static_cast<char*>(p) + std::size_t(elements) * kActBytes : nullptr;
}

// Device buffers of the layer, carved out of one allocation.
struct Buffers {
  // forward, kept for backward
  float* logits = nullptr;       // [T, E]
  int* experts = nullptr;        // [T, k]
  float* weights = nullptr;      // [T, k]
  float* scale = nullptr;        // [T]
  int* group_sizes = nullptr;    // [E]
  int* row_of = nullptr;         // [T k]
  int* pair_of = nullptr;        // [T k]
  int* token_of = nullptr;       // [T k] token of each sorted row: the up ragged dot's gather index
  float* weight_of = nullptr;    // [T k] combine weight of each sorted row: the down ragged dot's row factors
  float* sums = nullptr;         // [T, H] f32: the routed experts' weighted rows, added by the down ragged dot
  int* bad = nullptr;            // [1]
  void* sort_ws = nullptr;
  int* one_group = nullptr;      // [1] = T: the group sizes of the one-group plans
  float* ones = nullptr;         // [T k] = 1: the unpermute's weights
  void *rows = nullptr, *up = nullptr, *act = nullptr, *out = nullptr;          // [M,H] [M,2F] [M,F] [M,H]
  void *s_up = nullptr, *s_act = nullptr, *s_out = nullptr, *s_tmp = nullptr;  // [S,T,2F] [S,T,F] [T,H] [T,H]
  // backward scratch
  float *d_weights = nullptr, *d_scale = nullptr;  // [T k]
  void* d_logits = nullptr;                        // [T, E] bf16
  void *d_rows = nullptr, *d_act = nullptr, *d_up = nullptr;  // [M,H] (d_out, then d_in) [M,F] [M,2F]
  void *s_d_act = nullptr, *s_d_up = nullptr, *s_d_in = nullptr;  // [T,F] [T,2F] [T,H]
  void* ws = nullptr;
  // expert parallelism: rows received per (rank, local expert), their sum per local expert, and
  // the rows received, their up projection, activation and the experts' output [W M, ...]
  int* recv_counts = nullptr;  // [E] = [W, E / W]
  int* local_gs = nullptr;     // [E / W]
  void *recv_rows = nullptr, *recv_up = nullptr, *recv_act = nullptr, *recv_out = nullptr;
};

// Hands out aligned pieces of [base, base + size): with base 0 it only measures.
class Carver {
 public:
  explicit Carver(std::uintptr_t base) : base_(base) {}
  template <class T>
  void take(T*& p, std::size_t bytes) {
    p = reinterpret_cast<T*>(base_ + used_);
    used_ += align_up(std::max<std::size_t>(bytes, 1));
  }
  std::size_t used() const { return used_; }

 private:
  std::uintptr_t base_;
  std::size_t used_ = 0;
};

// Events between the steps of a pass, when profiling.
struct StepMarks {
  std::vector<CUevent> events;
  std::vector<const char*> names;
  std::size_t used = 0;
};

Status mark(StepMarks* marks, CUstream stream, const char* name) {
  if (!marks) return Status::ok();
  if (marks->used == marks->events.size()) return internal_error("profile: more steps than events");
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuEventRecord(marks->events[marks->used], stream), "cuEventRecord");
  marks->names[marks->used++] = name;
  return Status::ok();
}

// Whether the [T, H] bf16 token rows (x, or dy) a ragged dot gathers from stay within the 64 MiB
// the fusions measured faster at (see gathers_in_up_gemm).
bool token_rows_fit(const MoeConfig& c, std::int64_t tokens) {
  return tokens * c.hidden * 2 <= (std::int64_t(64) << 20);
}

// Whether the routed up projection tries to read x through the sort's index (the cuda backend
// may still refuse: not Hopper, ...). Never for Llama-4, whose routed rows are scaled. kAuto:
// where it measured faster on an H100 (2026-12-06, bench/RESULTS.md):
//  - up projections of more than 256 columns (the Hopper kernel's CTA pairs, each gathering half
//    of the rows) and at most 4096, where the gather kernel's write of the rows is 5-14% of the
//    projection's time (deepseek-v3, qwen3-30b-a3b); at mixtral-8x7b's 28672 columns it is about
//    1%, less than gathering in the kernel costs;
//  - x of at most 64 MiB: the pair tiles of one row block read each token's row again from x,
//    which pays while x stays mostly in L2 (50 MB on an H100); the bound is where the measurements
//    turned (deepseek-v3 at 8192 tokens, 112 MiB of x, lost 1%; at 4096, 56 MiB, won 2%).
bool gathers_in_up_gemm(Fusion asked, const MoeConfig& c, std::int64_t tokens) {
  if (c.router == RouterKind::kLlama4 || asked == Fusion::kOff) return false;
  if (asked == Fusion::kOn) return true;
  return 2 * c.ffn > 256 && 2 * c.ffn <= 4096 && token_rows_fit(c, tokens);
}

// Whether the routed down projection's data gradient tries to read dy through the sort's token
// index (the cuda backend may still refuse). Never for Llama-4 (its combine weight is 1 and its
// backward scales the inputs instead). kAuto: where it measured faster on an H100 (2026-12-06,
// bench/RESULTS.md): the combine's backward then only writes the scaled rows (qwen3-30b-a3b:
// 0.065 against 0.125 ms at 4096 tokens, 0.154 against 0.264 at 8192), and the gradient's ragged
// dot on gathered rows costs less than that below ~1024 columns (768: 0.247 against 0.249 and
// 0.419 against 0.382 ms, on one CTA per tile). At deepseek-v3's 2048 columns the gathered plain
// tile lost what the swapped tile of the plain path gains (3.097 against 2.918 ms, a wash with the
// combine's 0.16 ms), at mixtral-8x7b's 14336 it lost 0.38 ms. dy of at most 64 MiB, as for x.
bool gathers_in_down_data_grad(Fusion asked, const MoeConfig& c, std::int64_t tokens) {
  if (c.router == RouterKind::kLlama4 || asked == Fusion::kOff) return false;
  if (asked == Fusion::kOn) return true;
  return c.ffn > 256 && c.ffn <= 1024 && token_rows_fit(c, tokens);
}

// Whether the up projection's weight gradient tries to read x through the index, where the up
// projection does. kAuto: where it measured faster or about even on an H200 (2026-12-06, bench/RESULTS.md):
// ffn of at most 1024 (qwen3-30b-a3b: the gather plus the weight gradient 0.655 ms against 0.588
// for the gathering tile at 4096 tokens, 1.010 against 1.026 at 8192); deepseek-v3's weight
// gradient (2048 ffn, groups of ~128 rows: two k steps a tile, each waiting for its rows' indices)
// took 9.405 ms gathering against 0.205 + 8.911 ms.
bool gathers_in_up_weight_grad(Fusion asked, const MoeConfig& c) {
  if (asked == Fusion::kOff) return false;
  return asked == Fusion::kOn || c.ffn <= 1024;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

struct DeviceMoeLayer::State {
  MoeConfig c;
  std::int64_t t = 0, m = 0;
  DeviceMoeOptions options;
  const cuda::Device* device = nullptr;
  std::optional<DevicePermutation> perm;
  std::optional<DeviceMoeOps> ops;
  std::vector<Plan> plans;
  CUdeviceptr base = 0;
  std::size_t bytes = 0, ws_bytes = 0;
  Buffers b;
  bool forwarded = false;
  bool gathered_up = false;  // plans[routed up] reads its rows from x through b.token_of
  // plans[routed d_w_up] reads them so too (backward then runs no gather kernel for it)
  bool gathered_up_grad = false;
  // plans[routed d_act] reads dy through b.token_of: backward's activation step then applies the
  // combine weights and makes their gradient, and no step reads the expert rows b.out
  bool gathered_down_grad = false;
  // The fused forms of the routed projections. When one exists, forward always runs it (expert
  // parallelism, which would not, excludes them), so b.up or b.out never holds forward's product
  // and backward always computes it again: decided by the plan, not by what the host last ran,
  // which a graph replay of forward would not update.
  std::optional<Plan> swiglu_up;     // the routed up projection with the SwiGLU epilogue (into b.act)
  std::optional<Plan> scatter_down;  // the routed down projection adding its rows into b.sums
  bool combined_in_down() const { return scatter_down.has_value(); }
  // the sort's token index: read by the gathering up projection and the scattering down projection
  bool needs_token_of() const { return gathered_up || gathered_down_grad || combined_in_down(); }
  // expert parallelism
  ep::Communicator* comm = nullptr;
  std::int64_t world = 1, local_experts = 0;
  std::vector<std::int64_t> ep_rows;  // the rows each pair of ep_plans is planned for: M, 2M, 4M, ..., W M
  std::vector<Plan> ep_plans;         // [up, down] per entry of ep_rows
  std::int32_t* host_local_gs = nullptr;  // pinned [E / W]: the local group sizes on their way up

  ~State() {
    if (base || host_local_gs) {
      cuda::ScopedContext ctx(device->context);
      if (base) cuda::driver()->cuMemFree(base);
      if (host_local_gs) cuda::driver()->cuMemFreeHost(host_local_gs);
    }
  }

  bool llama4() const { return c.router == RouterKind::kLlama4; }
  DeviceSortBuffers sorted() const { return {b.group_sizes, b.row_of, b.pair_of, b.bad, b.token_of, b.weight_of}; }

  void carve(Carver& cv) {
    const std::size_t t4 = std::size_t(t) * 4, m4 = std::size_t(m) * 4, e = std::size_t(c.experts);
    const std::size_t h = std::size_t(c.hidden), f = std::size_t(c.ffn), s = std::size_t(c.shared_experts);
    const std::size_t mt = std::size_t(m), tt = std::size_t(t);
    cv.take(b.logits, tt * e * 4);
    cv.take(b.experts, m4);
    cv.take(b.weights, m4);
    cv.take(b.scale, t4);
    cv.take(b.group_sizes, e * 4);
    cv.take(b.row_of, m4);
    cv.take(b.pair_of, m4);
    if (needs_token_of()) cv.take(b.token_of, m4);  // else null: the sort then writes no token index
    if (combined_in_down()) {
      cv.take(b.weight_of, m4);
      cv.take(b.sums, tt * h * 4);
    }
    cv.take(b.bad, 4);
    cv.take(b.sort_ws, perm->sort_workspace_bytes());
    cv.take(b.one_group, 4);
    cv.take(b.ones, m4);
    cv.take(b.rows, mt * h * kActBytes);
    cv.take(b.up, mt * 2 * f * kActBytes);
    cv.take(b.act, mt * f * kActBytes);
    // (with the combine in the down projection and dy gathered by backward, no step uses the expert rows)
    cv.take(b.out, combined_in_down() && gathered_down_grad ? 0 : mt * h * kActBytes);
    cv.take(b.s_up, s * tt * 2 * f * kActBytes);
    cv.take(b.s_act, s * tt * f * kActBytes);
    cv.take(b.s_out, s ? tt * h * kActBytes : 0);
    cv.take(b.s_tmp, s > 1 ? tt * h * kActBytes : 0);
    cv.take(b.d_weights, m4);
    cv.take(b.d_scale, m4);
    cv.take(b.d_logits, tt * e * kActBytes);
    cv.take(b.d_rows, mt * h * kActBytes);
    cv.take(b.d_act, mt * f * kActBytes);
    cv.take(b.d_up, mt * 2 * f * kActBytes);
    cv.take(b.s_d_act, s ? tt * f * kActBytes : 0);
    cv.take(b.s_d_up, s ? tt * 2 * f * kActBytes : 0);
    cv.take(b.s_d_in, s ? tt * h * kActBytes : 0);
    cv.take(b.ws, ws_bytes);
    const std::size_t recv = comm ? std::size_t(world) * mt : 0;  // rows a rank can receive
    cv.take(b.recv_counts, comm ? e * 4 : 0);
    cv.take(b.local_gs, comm ? std::size_t(local_experts) * 4 : 0);
    cv.take(b.recv_rows, recv * h * kActBytes);
    cv.take(b.recv_up, recv * 2 * f * kActBytes);
    cv.take(b.recv_act, recv * f * kActBytes);
    cv.take(b.recv_out, recv * h * kActBytes);
  }

  Status gemm(int which, const void* lhs, const void* rhs, const void* gs, void* out, CUstream stream) const {
    return run_plan(plans[std::size_t(which)], lhs, rhs, gs, out, {b.ws, ws_bytes, MemorySpace::kDevice}, stream);
  }

  // A routed ragged dot whose lhs rows are token rows ([T, H]: x, or dy) gathered by b.token_of.
  Status gathered_gemm(int which, const void* token_rows, const void* rhs, void* out, CUstream stream) const {
    const GatheredLhs tokens{std::size_t(t * c.hidden) * kActBytes, b.token_of};
    return run_plan(plans[std::size_t(which)], token_rows, rhs, b.group_sizes, out,
                    {b.ws, ws_bytes, MemorySpace::kDevice}, stream, nullptr, &tokens);
  }
  // The routed up projection on rows gathered from x by b.token_of.
  Status gathered_up_gemm(const void* x, const void* w_up, CUstream stream) const {
    return gathered_gemm(kRouted + kFfnUp, x, w_up, b.up, stream);
  }

  // The routed up projection with the SwiGLU epilogue: the activations into b.act, reading the
  // rows as the plain up projection does (b.rows, or x through b.token_of).
  Status swiglu_up_gemm(const void* x, const void* w_up, CUstream stream) const {
    const GatheredLhs tokens{std::size_t(t * c.hidden) * kActBytes, b.token_of};
    return run_plan(*swiglu_up, gathered_up ? x : b.rows, w_up, b.group_sizes, b.act,
                    {b.ws, ws_bytes, MemorySpace::kDevice}, stream, nullptr, gathered_up ? &tokens : nullptr, nullptr,
                    std::size_t(m * c.ffn) * kActBytes);
  }

  Status forward(const void* x, const DeviceMoeParams& p, void* y, CUstream st, StepMarks* mk) {
    const std::int64_t h = c.hidden, f = c.ffn, k = c.top_k, s = c.shared_experts;
    forwarded = false;
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "start"));
    RAGDOT_RETURN_IF_ERROR(gemm(kRouterLogits, x, p.router, b.one_group, b.logits, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "router logits"));
    RAGDOT_RETURN_IF_ERROR(ops->route(b.logits, p.router_bias, t, b.experts, b.weights, b.scale, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "route"));
    RAGDOT_RETURN_IF_ERROR(perm->sort(b.experts, m, sorted(), b.sort_ws, st, k, combined_in_down() ? b.weights : nullptr));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "sort"));
    if (!gathered_up) {
      RAGDOT_RETURN_IF_ERROR(perm->gather(x, llama4() ? b.scale : nullptr, sorted(), t, k, h, kAct, b.rows, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "gather"));
    }
    if (comm) {
      RAGDOT_RETURN_IF_ERROR(remote_experts(p, st, mk));
    } else {
      if (swiglu_up) {
        RAGDOT_RETURN_IF_ERROR(swiglu_up_gemm(x, p.w_up, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, gathered_up ? "gather + up + swiglu" : "up + swiglu"));
      } else {
        if (gathered_up) {
          RAGDOT_RETURN_IF_ERROR(gathered_up_gemm(x, p.w_up, st));
          RAGDOT_RETURN_IF_ERROR(mark(mk, st, "gather + up"));
        } else {
          RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnUp, b.rows, p.w_up, b.group_sizes, b.up, st));
          RAGDOT_RETURN_IF_ERROR(mark(mk, st, "up"));
        }
        RAGDOT_RETURN_IF_ERROR(ops->glu(c.activation, b.up, m, f, kAct, b.act, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "activation"));
      }
      if (combined_in_down()) {
        // the sums start from zero (bits 0 are +0.0f); the down projection adds every row into them
        RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(b.sums), 0,
                                                                   std::size_t(t * h), st),
                                  "cuMemsetD32Async (combine sums)");
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "combine clear"));
        const ScatteredOut into_tokens{std::size_t(t * h) * 4, b.token_of, b.weight_of};
        RAGDOT_RETURN_IF_ERROR(run_plan(*scatter_down, b.act, p.w_down, b.group_sizes, b.sums,
                                        {b.ws, ws_bytes, MemorySpace::kDevice}, st, nullptr, nullptr, &into_tokens));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down + combine"));
      } else {
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnDown, b.act, p.w_down, b.group_sizes, b.out, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down"));
      }
    }
    for (std::int64_t j = 0; j < s; ++j) {
      void* up = offset(b.s_up, j * t * 2 * f);
      void* act = offset(b.s_act, j * t * f);
      RAGDOT_RETURN_IF_ERROR(gemm(kShared + kFfnUp, x, offset(p.shared_up, j * h * 2 * f), b.one_group, up, st));
      RAGDOT_RETURN_IF_ERROR(ops->glu(c.activation, up, t, f, kAct, act, st));
      RAGDOT_RETURN_IF_ERROR(gemm(kShared + kFfnDown, act, offset(p.shared_down, j * f * h), b.one_group,
                                  j == 0 ? b.s_out : b.s_tmp, st));
      if (j > 0) RAGDOT_RETURN_IF_ERROR(ops->accumulate(b.s_out, b.s_tmp, t * h, kAct, st));
    }
    if (s > 0) RAGDOT_RETURN_IF_ERROR(mark(mk, st, "shared experts"));
    if (combined_in_down()) {
      RAGDOT_RETURN_IF_ERROR(perm->finish_combine(b.sums, s > 0 ? b.s_out : nullptr, t, h, kAct, y, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "combine finish"));
    } else {
      RAGDOT_RETURN_IF_ERROR(
          perm->combine(b.out, b.weights, sorted(), t, k, h, kAct, false, y, st, s > 0 ? b.s_out : nullptr));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "combine"));
    }
    forwarded = true;
    return Status::ok();
  }

  // Expert parallelism: the sorted rows b.rows (this rank's pairs, by expert, so each rank's are
  // contiguous) go to their experts' ranks, which run the up and down ragged dots over the rows
  // they receive and send them back into b.out, in b.rows' order.
  Status remote_experts(const DeviceMoeParams& p, CUstream st, StepMarks* mk) {
    const std::int64_t h = c.hidden, f = c.ffn;
    const std::int64_t row_bytes = h * std::int64_t(kActBytes);
    RAGDOT_RETURN_IF_ERROR(comm->exchange_counts(b.group_sizes, b.recv_counts, c.experts, st));
    RAGDOT_ASSIGN_OR_RETURN(ep::ExchangePlan xp,
                            comm->plan(b.group_sizes, b.recv_counts, c.experts, st, ep::Layout::kByExpert));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "exchange counts"));
    // plan() waited for the stream, so the last forward's upload from host_local_gs is done
    for (std::int64_t e = 0; e < local_experts; ++e) host_local_gs[e] = std::int32_t(xp.local_group_sizes[std::size_t(e)]);
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemcpyHtoDAsync(dptr(b.local_gs), host_local_gs,
                                                                std::size_t(local_experts) * 4, st),
                              "cuMemcpyHtoDAsync (local group sizes)");
    RAGDOT_RETURN_IF_ERROR(comm->dispatch(xp, b.rows, b.recv_rows, row_bytes, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "dispatch"));
    std::size_t which = 0;
    while (ep_rows[which] < xp.recv_capacity) ++which;  // ep_rows ends at W M, which holds any exchange
    const std::int64_t rows = xp.recv_capacity;
    const Plan& up = ep_plans[2 * which];
    const Plan& down = ep_plans[2 * which + 1];
    const MutableBuffer ws{b.ws, ws_bytes, MemorySpace::kDevice};
    RAGDOT_RETURN_IF_ERROR(run_plan(up, b.recv_rows, p.w_up, b.local_gs, b.recv_up, ws, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "up"));
    RAGDOT_RETURN_IF_ERROR(ops->glu(c.activation, b.recv_up, rows, f, kAct, b.recv_act, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "activation"));
    RAGDOT_RETURN_IF_ERROR(run_plan(down, b.recv_act, p.w_down, b.local_gs, b.recv_out, ws, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down"));
    RAGDOT_RETURN_IF_ERROR(comm->combine(xp, b.recv_out, b.out, row_bytes, st));
    return mark(mk, st, "combine exchange");
  }

  Status backward(const void* x, const DeviceMoeParams& p, const void* dy, const DeviceMoeGrads& g, CUstream st,
                  StepMarks* mk) {
    const std::int64_t h = c.hidden, f = c.ffn, k = c.top_k, s = c.shared_experts;
    const int* gs = b.group_sizes;
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "start"));
    // combine: y[t] = sum_j w[t,j] out[row(t,j)] -> d_out[row] = w dy[t], d_w[t,j] = dy[t] . out[row]
    if (gathered_down_grad) {
      // g[row] = dy[t] W_down^T, from dy through the index; the activation's backward takes w g as
      // d_act and makes d_w[t,j] = act[row] . g[row] (= dy[t] . out[row]), so nothing reads the
      // expert rows. The scaled rows d_out are still made, for the down weights' gradient.
      RAGDOT_RETURN_IF_ERROR(gathered_gemm(kRouted + kFfnDataGradAct, dy, p.w_down, b.d_act, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down: d_act"));
      if (g.d_w_down) {
        RAGDOT_RETURN_IF_ERROR(perm->gather(dy, nullptr, sorted(), t, k, h, kAct, b.d_rows, st, b.weights));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "combine backward"));
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnWeightGradDown, b.act, b.d_rows, gs, g.d_w_down, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down: d_w"));
      }
    } else {
      if (combined_in_down()) {  // forward added the expert rows into their tokens' sums: the combine's backward needs them
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnDown, b.act, p.w_down, gs, b.out, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down again"));
      }
      RAGDOT_RETURN_IF_ERROR(
          perm->combine_backward(dy, b.out, b.weights, sorted(), t, k, h, kAct, b.d_rows, b.d_weights, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "combine backward"));
      RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnDataGradAct, b.d_rows, p.w_down, gs, b.d_act, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down: d_act"));
      if (g.d_w_down) {
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnWeightGradDown, b.act, b.d_rows, gs, g.d_w_down, st));
        RAGDOT_RETURN_IF_ERROR(mark(mk, st, "down: d_w"));
      }
    }
    if (swiglu_up) {  // forward wrote the activations only: the SwiGLU backward needs the product
      if (gathered_up) {
        RAGDOT_RETURN_IF_ERROR(gathered_up_gemm(x, p.w_up, st));
      } else {
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnUp, b.rows, p.w_up, gs, b.up, st));
      }
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "up again"));
    }
    if (gathered_down_grad) {
      RAGDOT_RETURN_IF_ERROR(ops->glu_backward_weighted(c.activation, b.up, b.d_act, b.pair_of, b.weights, m, f, kAct,
                                                        b.d_up, b.d_weights, st));
    } else {
      RAGDOT_RETURN_IF_ERROR(ops->glu_backward(c.activation, b.up, b.d_act, m, f, kAct, b.d_up, st));
    }
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "activation backward"));
    // d_out is consumed: its buffer takes the rows' gradient
    RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnDataGradIn, b.d_up, p.w_up, gs, b.d_rows, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "up: d_rows"));
    if (g.d_w_up) {
      if (gathered_up_grad) {  // forward read x through the index, and so does the weight gradient
        RAGDOT_RETURN_IF_ERROR(gathered_gemm(kRouted + kFfnWeightGradUp, x, b.d_up, g.d_w_up, st));
      } else {
        if (gathered_up) {  // forward read x through the index: the sorted rows exist only now
          RAGDOT_RETURN_IF_ERROR(perm->gather(x, nullptr, sorted(), t, k, h, kAct, b.rows, st));
          RAGDOT_RETURN_IF_ERROR(mark(mk, st, "gather"));
        }
        RAGDOT_RETURN_IF_ERROR(gemm(kRouted + kFfnWeightGradUp, b.rows, b.d_up, gs, g.d_w_up, st));
      }
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "up: d_w"));
    }
    if (llama4()) {  // rows[r] = scale[t] x[t] -> d_scale[t] = sum over its pairs of d_rows[r] . x[t]
      RAGDOT_RETURN_IF_ERROR(
          perm->combine_backward(x, b.d_rows, nullptr, sorted(), t, k, h, kAct, nullptr, b.d_scale, st));
      RAGDOT_RETURN_IF_ERROR(mark(mk, st, "gather backward"));
    }
    RAGDOT_RETURN_IF_ERROR(
        ops->route_backward(b.logits, b.experts, b.d_weights, llama4() ? b.d_scale : nullptr, t, b.d_logits, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "router backward"));
    // logits = x Wr -> d_x = d_logits Wr^T (the first write of d_x), d_Wr = x^T d_logits
    RAGDOT_RETURN_IF_ERROR(gemm(kRouterDataGrad, b.d_logits, p.router, b.one_group, g.d_x, st));
    if (g.d_router) RAGDOT_RETURN_IF_ERROR(gemm(kRouterWeightGrad, x, b.d_logits, b.one_group, g.d_router, st));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "router products"));
    for (std::int64_t j = 0; j < s; ++j) {
      const void* up = offset(b.s_up, j * t * 2 * f);
      const void* act = offset(b.s_act, j * t * f);
      const void* w_up = offset(p.shared_up, j * h * 2 * f);
      RAGDOT_RETURN_IF_ERROR(gemm(kShared + kFfnDataGradAct, dy, offset(p.shared_down, j * f * h), b.one_group,
                                  b.s_d_act, st));
      if (g.d_shared_down) {
        RAGDOT_RETURN_IF_ERROR(
            gemm(kShared + kFfnWeightGradDown, act, dy, b.one_group, offset(g.d_shared_down, j * f * h), st));
      }
      RAGDOT_RETURN_IF_ERROR(ops->glu_backward(c.activation, up, b.s_d_act, t, f, kAct, b.s_d_up, st));
      RAGDOT_RETURN_IF_ERROR(
          gemm(kShared + kFfnDataGradIn, b.s_d_up, w_up, b.one_group, j == 0 ? b.s_d_in : b.s_tmp, st));
      if (j > 0) RAGDOT_RETURN_IF_ERROR(ops->accumulate(b.s_d_in, b.s_tmp, t * h, kAct, st));
      if (g.d_shared_up) {
        RAGDOT_RETURN_IF_ERROR(
            gemm(kShared + kFfnWeightGradUp, x, b.s_d_up, b.one_group, offset(g.d_shared_up, j * h * 2 * f), st));
      }
    }
    if (s > 0) RAGDOT_RETURN_IF_ERROR(mark(mk, st, "shared experts backward"));
    // gather: rows[r] = scale[t] x[t] -> d_x[t] += scale[t] sum_j d_rows[row(t,j)], plus the shared experts'
    RAGDOT_RETURN_IF_ERROR(perm->combine(b.d_rows, llama4() ? b.scale : b.ones, sorted(), t, k, h, kAct, true, g.d_x,
                                         st, s > 0 ? b.s_d_in : nullptr));
    RAGDOT_RETURN_IF_ERROR(mark(mk, st, "unpermute d_x"));
    return Status::ok();
  }
};

DeviceMoeLayer::DeviceMoeLayer(std::unique_ptr<State> s) : s_(std::move(s)) {}
DeviceMoeLayer::DeviceMoeLayer(DeviceMoeLayer&&) noexcept = default;
DeviceMoeLayer& DeviceMoeLayer::operator=(DeviceMoeLayer&&) noexcept = default;
DeviceMoeLayer::~DeviceMoeLayer() = default;

Result<DeviceMoeLayer> DeviceMoeLayer::create(const MoeConfig& c, std::int64_t tokens, const DeviceMoeOptions& o) {
  RAGDOT_RETURN_IF_ERROR(check_layer_config(c, tokens));
  if (tokens > std::int64_t(0x7fffffff) / c.top_k) {
    return invalid_argument("the device MoE layer takes at most 2^31 - 1 (token, slot) pairs; " +
                            std::to_string(tokens) + " tokens x top-" + std::to_string(c.top_k) + " is more");
  }
  if (o.capacity_factor && o.expert_backend != "padded") {
    return invalid_argument("a capacity factor needs expert_backend \"padded\" (got \"" + o.expert_backend + "\")");
  }
  if (o.swiglu_in_up_gemm && c.activation != GatedActivation::kSwiGLU) {
    return invalid_argument(std::string("swiglu_in_up_gemm fuses SwiGLU only; this layer's activation is ") +
                            activation_name(c.activation));
  }
  auto s = std::make_unique<State>();
  s->c = c;
  s->t = tokens;
  s->m = tokens * c.top_k;
  s->options = o;
  if (o.expert_parallel) {
    ep::Communicator& comm = *o.expert_parallel;
    s->comm = &comm;
    s->world = comm.world_size();
    if (o.expert_backend != "cuda") {
      return invalid_argument("expert parallelism runs the routed experts on the cuda backend (got \"" +
                              o.expert_backend + "\")");
    }
    if (comm.device() != o.device) {
      return invalid_argument("expert parallelism: the communicator is on GPU " + std::to_string(comm.device()) +
                              ", the layer on GPU " + std::to_string(o.device));
    }
    if (s->world < 1 || c.experts % s->world != 0) {
      return invalid_argument("expert parallelism: " + std::to_string(c.experts) + " experts do not split evenly over " +
                              std::to_string(s->world) + " ranks");
    }
    if (s->m > std::int64_t(0x7fffffff) / s->world) {
      return invalid_argument("expert parallelism: a rank may receive " + std::to_string(s->world) + " x " +
                              std::to_string(s->m) + " rows, more than 2^31 - 1");
    }
    s->local_experts = c.experts / s->world;
    for (std::int64_t b = 1;; b *= 2) {
      s->ep_rows.push_back(std::min(b, s->world) * s->m);
      if (b >= s->world) break;
    }
  }
  RAGDOT_ASSIGN_OR_RETURN(s->device, cuda::device(o.device));
  RAGDOT_ASSIGN_OR_RETURN(DevicePermutation perm, DevicePermutation::create(o.device, s->m, c.experts));
  s->perm.emplace(std::move(perm));
  RAGDOT_ASSIGN_OR_RETURN(DeviceMoeOps ops, DeviceMoeOps::create(o.device, c.router, c.experts, c.top_k, c.routed_scaling));
  s->ops.emplace(std::move(ops));

  // plans: the router and the shared experts on the cuda backend, the routed experts on the named one
  PlanOptions base;
  base.backend = "cuda";
  base.memory_space = MemorySpace::kDevice;
  base.device = o.device;
  base.effort = o.effort;
  PlanOptions routed = base;
  routed.backend = o.expert_backend;
  routed.padded_capacity_factor = o.capacity_factor;
  routed.padded_max_group_rows = o.max_group_rows;
  const GemmDTypes types{kAct, DType::kI32};
  std::vector<RaggedDotSpec> specs = router_specs(tokens, c.hidden, c.experts, types);
  specs[kRouterLogits].preferred_element_type = DType::kF32;
  specs[kRouterWeightGrad].preferred_element_type = DType::kF32;
  for (auto& spec : expert_ffn_specs(s->m, c.experts, c.hidden, c.ffn, types)) specs.push_back(std::move(spec));
  for (auto& spec : expert_ffn_specs(tokens, 1, c.hidden, c.ffn, types)) specs.push_back(std::move(spec));
  s->plans.reserve(kGemmCount);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const bool shared = int(i) >= kShared;
    if (shared && c.shared_experts == 0) break;
    RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::create(specs[i]));
    const bool routed_up = int(i) == kRouted + kFfnUp && !s->comm && o.expert_backend == "cuda";
    // the routed up projection with the SwiGLU epilogue, reading its rows as `up_options` say
    const auto plan_swiglu_up = [&](const PlanOptions& up_options) {
      if (!routed_up || !o.swiglu_in_up_gemm) return;
      PlanOptions fused = up_options;
      fused.swiglu_epilogue = true;
      if (auto p = make_plan(op, fused); p.ok()) {  // else (not Hopper, ...): up, then the SwiGLU kernel
        s->ws_bytes = std::max(s->ws_bytes, p->workspace_bytes());
        s->swiglu_up.emplace(std::move(*p));
      }
    };
    // This ragged dot with its lhs rows read from token rows (x or dy) through the sort's index,
    // kept as plans[i] if the backend takes it (else, not Hopper, ...: the plain plan
    // below, after a gather kernel or the combine's backward).
    PlanOptions gathering = routed;
    gathering.lhs_gather_rows = tokens;
    const auto plan_gathered = [&]() {
      auto plan = make_plan(op, gathering);
      if (!plan.ok()) return false;
      s->ws_bytes = std::max(s->ws_bytes, plan->workspace_bytes());
      s->plans.push_back(std::move(*plan));
      return true;
    };
    if (routed_up && gathers_in_up_gemm(o.gather_in_up_gemm, c, tokens) && plan_gathered()) {
      s->gathered_up = true;
      plan_swiglu_up(gathering);
      continue;
    }
    // the up projection's weight gradient reads x through the index where the up projection does
    if (int(i) == kRouted + kFfnWeightGradUp && s->gathered_up &&
        gathers_in_up_weight_grad(o.gather_in_up_weight_grad, c) && plan_gathered()) {
      s->gathered_up_grad = true;
      continue;
    }
    const bool routed_d_act = int(i) == kRouted + kFfnDataGradAct && !s->comm && o.expert_backend == "cuda";
    if (routed_d_act && gathers_in_down_data_grad(o.gather_in_down_data_grad, c, tokens) && plan_gathered()) {
      s->gathered_down_grad = true;
      continue;
    }
    auto plan = make_plan(op, int(i) >= kRouted && !shared ? routed : base);
    if (!plan.ok()) {
      return Status(plan.status().code(), "device MoE layer, " + layer_gemm_name(int(i)) + ": " + plan.status().message());
    }
    plan_swiglu_up(routed);
    if (int(i) == kRouted + kFfnDown && o.combine_in_down_gemm && !s->comm && o.expert_backend == "cuda") {
      PlanOptions scattering = routed;
      scattering.out_scatter_rows = tokens;  // the rows add into their tokens' sums
      if (auto p = make_plan(op, scattering); p.ok()) {  // else (not Hopper, ...): down, then the combine kernel
        s->ws_bytes = std::max(s->ws_bytes, p->workspace_bytes());
        s->scatter_down.emplace(std::move(*p));
      }
    }
    s->ws_bytes = std::max(s->ws_bytes, plan->workspace_bytes());
    s->plans.push_back(std::move(*plan));
  }
  // expert parallelism: the local experts' up and down ragged dots for each bound on the rows received
  for (std::int64_t rows : s->ep_rows) {
    auto ep_specs = expert_ffn_specs(rows, s->local_experts, c.hidden, c.ffn, types);
    for (int which : {int(kFfnUp), int(kFfnDown)}) {
      RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::create(ep_specs[std::size_t(which)]));
      auto plan = make_plan(op, base);
      if (!plan.ok()) {
        return Status(plan.status().code(), "device MoE layer, expert-parallel " + layer_gemm_name(kRouted + which) +
                                                " for " + std::to_string(rows) + " rows: " + plan.status().message());
      }
      s->ws_bytes = std::max(s->ws_bytes, plan->workspace_bytes());
      s->ep_plans.push_back(std::move(*plan));
    }
  }

  Carver measure(0);
  s->carve(measure);
  s->bytes = measure.used() + kAlign;
  cuda::ScopedContext ctx(s->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  const auto* d = cuda::driver();
  if (d->cuMemAlloc(&s->base, s->bytes) != CUDA_SUCCESS) {
    s->base = 0;
    return resource_exhausted("device MoE layer: cannot allocate " + std::to_string(s->bytes >> 20) +
                              " MiB of activations and workspace on " + s->device->name + " for " +
                              std::to_string(tokens) + " tokens");
  }
  Carver cv(std::uintptr_t(align_up(std::size_t(s->base))));
  s->carve(cv);
  if (s->comm) {
    void* host = nullptr;
    RAGDOT_CU_RETURN_IF_ERROR(d->cuMemHostAlloc(&host, std::size_t(s->local_experts) * 4, 0),
                              "cuMemHostAlloc (local group sizes)");
    s->host_local_gs = static_cast<std::int32_t*>(host);
  }
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD32Async(dptr(s->b.one_group), unsigned(tokens), 1, nullptr),
                            "cuMemsetD32Async");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemsetD32Async(dptr(s->b.ones), 0x3f800000u, std::size_t(s->m), nullptr),
                            "cuMemsetD32Async");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  return DeviceMoeLayer(std::move(s));
}

namespace {

Status check_params(const MoeConfig& c, const DeviceMoeParams& p) {
  if (!p.router || !p.w_up || !p.w_down) {
    return invalid_argument("device MoE params: router, w_up and w_down are required");
  }
  if (c.shared_experts > 0 && (!p.shared_up || !p.shared_down)) {
    return invalid_argument("device MoE params: this config has shared experts: shared_up and shared_down are required");
  }
  return Status::ok();
}

}  // namespace

Status DeviceMoeLayer::forward(const void* x, const DeviceMoeParams& params, void* y, void* stream) {
  if (!x || !y) return invalid_argument("device MoE forward: x and y are required");
  RAGDOT_RETURN_IF_ERROR(check_params(s_->c, params));
  return s_->forward(x, params, y, static_cast<CUstream>(stream), nullptr);
}

Status DeviceMoeLayer::backward(const void* x, const DeviceMoeParams& params, const void* dy,
                                const DeviceMoeGrads& grads, void* stream) {
  if (s_->comm) return unsupported("device MoE backward: not with expert parallelism (forward only)");
  if (!s_->forwarded) return invalid_argument("device MoE backward: run forward first");
  if (!x || !dy || !grads.d_x) return invalid_argument("device MoE backward: x, dy and grads.d_x are required");
  RAGDOT_RETURN_IF_ERROR(check_params(s_->c, params));
  return s_->backward(x, params, dy, grads, static_cast<CUstream>(stream), nullptr);
}

Result<DeviceMoeProfile> DeviceMoeLayer::profile(const void* x, const DeviceMoeParams& params, void* y,
                                                 const void* dy, const DeviceMoeGrads& grads, void* stream,
                                                 const DeviceMoeProfileOptions& o) {
  if (o.reps < 1 || o.warmup < 0) return invalid_argument("profile: reps >= 1 and warmup >= 0");
  if (!x || !y || (o.backward && (!dy || !grads.d_x))) {
    return invalid_argument("profile: x and y (and with backward dy and grads.d_x) are required");
  }
  RAGDOT_RETURN_IF_ERROR(check_params(s_->c, params));
  State& s = *s_;
  CUstream st = static_cast<CUstream>(stream);
  cuda::ScopedContext ctx(s.device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  const auto* d = cuda::driver();
  constexpr std::size_t kMaxMarks = 24;
  StepMarks fwd, bwd;
  // every event of this profile, destroyed on every return path
  struct Events {
    std::vector<CUevent> all;
    ~Events() {
      for (CUevent e : all) cuda::driver()->cuEventDestroy(e);
    }
    Result<CUevent> make() {
      CUevent e = nullptr;
      RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
      all.push_back(e);
      return e;
    }
  } events;
  for (StepMarks* mk : {&fwd, &bwd}) {
    mk->names.assign(kMaxMarks, nullptr);
    for (std::size_t i = 0; i < kMaxMarks; ++i) {
      RAGDOT_ASSIGN_OR_RETURN(CUevent e, events.make());
      mk->events.push_back(e);
    }
  }
  RAGDOT_ASSIGN_OR_RETURN(CUevent begin, events.make());
  RAGDOT_ASSIGN_OR_RETURN(CUevent end, events.make());
  auto pass = [&](bool backward, StepMarks* f_marks, StepMarks* b_marks) -> Status {
    RAGDOT_RETURN_IF_ERROR(s.forward(x, params, y, st, f_marks));
    if (backward) RAGDOT_RETURN_IF_ERROR(s.backward(x, params, dy, grads, st, b_marks));
    return Status::ok();
  };
  auto elapsed = [&](CUevent a, CUevent b) -> Result<double> {
    float ms = 0;
    RAGDOT_CU_RETURN_IF_ERROR(d->cuEventSynchronize(b), "cuEventSynchronize");
    RAGDOT_CU_RETURN_IF_ERROR(d->cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return double(ms);
  };
  auto timed = [&](const std::function<Status()>& body) -> Result<double> {
    std::vector<double> times;
    for (int i = 0; i < o.reps; ++i) {
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(begin, st), "cuEventRecord");
      RAGDOT_RETURN_IF_ERROR(body());
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(end, st), "cuEventRecord");
      RAGDOT_ASSIGN_OR_RETURN(double ms, elapsed(begin, end));
      times.push_back(ms);
    }
    return median(times);
  };

  for (int i = 0; i < o.warmup; ++i) RAGDOT_RETURN_IF_ERROR(pass(o.backward, nullptr, nullptr));
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(st), "cuStreamSynchronize");
  DeviceMoeProfile r;
  RAGDOT_ASSIGN_OR_RETURN(r.forward_ms, timed([&] { return pass(false, nullptr, nullptr); }));
  if (o.backward) {
    RAGDOT_ASSIGN_OR_RETURN(r.forward_backward_ms, timed([&] { return pass(true, nullptr, nullptr); }));
  }

  // per step: medians over the repetitions of the time between consecutive marks
  std::vector<std::vector<double>> f_times, b_times;
  for (int i = 0; i < o.reps; ++i) {
    fwd.used = bwd.used = 0;
    RAGDOT_RETURN_IF_ERROR(pass(o.backward, &fwd, o.backward ? &bwd : nullptr));
    for (auto [mk, times] : {std::pair{&fwd, &f_times}, std::pair{&bwd, &b_times}}) {
      if (mk->used == 0) continue;
      times->resize(mk->used - 1);
      for (std::size_t j = 1; j < mk->used; ++j) {
        RAGDOT_ASSIGN_OR_RETURN(double ms, elapsed(mk->events[j - 1], mk->events[j]));
        (*times)[j - 1].push_back(ms);
      }
    }
  }
  for (std::size_t j = 0; j < f_times.size(); ++j) r.forward_steps.push_back({fwd.names[j + 1], median(f_times[j])});
  for (std::size_t j = 0; j < b_times.size(); ++j) r.backward_steps.push_back({bwd.names[j + 1], median(b_times[j])});

  // one read and one write of the routed activations: copy the sorted rows into backward scratch
  r.rows_bytes = std::size_t(s.m * s.c.hidden) * kActBytes;
  const auto copy_rows = [&]() -> Status {
    RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoDAsync(dptr(s.b.d_rows), dptr(s.b.rows), r.rows_bytes, st),
                              "cuMemcpyDtoDAsync");
    return Status::ok();
  };
  RAGDOT_ASSIGN_OR_RETURN(r.rows_copy_ms, timed(copy_rows));
  return r;
}

DeviceMoeRouting DeviceMoeLayer::routing() const {
  const Buffers& b = s_->b;
  return {b.logits, b.experts, b.weights, b.scale, b.group_sizes};
}

Result<DeviceMoeRoutingStats> DeviceMoeLayer::routing_stats(void* stream) const {
  if (!s_->forwarded) return invalid_argument("routing_stats: run forward first");
  cuda::ScopedContext ctx(s_->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  const auto* d = cuda::driver();
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  std::vector<std::int32_t> gs(std::size_t(s_->c.experts));
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoH(gs.data(), dptr(s_->b.group_sizes), gs.size() * 4), "cuMemcpyDtoH");
  DeviceMoeRoutingStats r;
  if (s_->options.capacity_factor) {
    r.capacity = planner::capacity_for_factor(*s_->options.capacity_factor, s_->m, s_->c.experts);
  }
  for (std::int32_t g : gs) {
    r.group_sizes.push_back(g);
    r.largest_group = std::max<std::int64_t>(r.largest_group, g);
    if (g == 0) ++r.empty_experts;
    if (s_->options.capacity_factor) r.dropped_pairs += std::max<std::int64_t>(g - r.capacity, 0);
  }
  return r;
}

const MoeConfig& DeviceMoeLayer::config() const { return s_->c; }
std::int64_t DeviceMoeLayer::tokens() const { return s_->t; }
std::size_t DeviceMoeLayer::device_bytes() const { return s_->bytes; }

bool DeviceMoeLayer::graph_safe() const {
  if (s_->comm) return false;  // the exchange's plan waits for the host
  const auto safe = [](const Plan& p) { return p.graph_safe() && !p.needs_host_sync(); };
  return std::all_of(s_->plans.begin(), s_->plans.end(), safe) && (!s_->swiglu_up || safe(*s_->swiglu_up)) &&
         (!s_->scatter_down || safe(*s_->scatter_down));
}

std::string DeviceMoeLayer::describe() const {
  std::string out;
  for (std::size_t i = 0; i < s_->plans.size(); ++i) out += layer_gemm_name(int(i)) + ": " + s_->plans[i].to_string() + "\n";
  if (s_->swiglu_up) out += layer_gemm_name(kRouted + kFfnUp) + " with SwiGLU (forward): " + s_->swiglu_up->to_string() + "\n";
  if (s_->scatter_down) {
    out += layer_gemm_name(kRouted + kFfnDown) + " adding into the tokens (forward): " + s_->scatter_down->to_string() + "\n";
  }
  for (std::size_t i = 0; i < s_->ep_plans.size(); ++i) {
    out += "expert-parallel " + layer_gemm_name(kRouted + (i % 2 ? kFfnDown : kFfnUp)) + " (" +
           std::to_string(s_->ep_rows[i / 2]) + " rows): " + s_->ep_plans[i].to_string() + "\n";
  }
  return out;
}

}  // namespace ragdot::moe
