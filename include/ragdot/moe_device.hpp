// One MoE layer on a GPU, forward and backward: the layer of ragdot/moe.hpp with its activations
// and parameters in device memory (bf16; router logits, combine weights and the router's
// gradient f32). Every step is enqueued on the caller's stream: the router's logits (a planned
// one-group ragged dot), the router kernel of the preset, a stable counting sort of the
// (token, slot) pairs by expert whose histogram is the group sizes (on the device, no host sync),
// the gather of the sorted rows, the expert FFN (one ragged dot for gate and up, the config's
// gated activation, one ragged dot down), the shared experts (one-group ragged dots) and the
// weighted combine, accumulated in f32 on top of the shared experts' output. Backward: the combine's gradients, the
// data gradients by mode 1 against the transposed weights, the weight gradients by mode 2
// (ragged contracting), the activation's backward, the router's backward of each kind and its two
// products. Every buffer is allocated by create; forward and backward allocate nothing and,
// with the `cuda` backend, never wait for the host, so both can be captured in a CUDA graph.
//
// No CUDA header here: device pointers are void* (or typed where their dtype is fixed), a stream
// is a CUstream passed as void* (null: the legacy stream). Built without CUDA, create and
// fill_device_uniform return an `unavailable` error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ragdot/dtype.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/status.hpp"

namespace ragdot::ep {
class Communicator;  // ragdot/ep_transport.hpp
}  // namespace ragdot::ep

namespace ragdot::moe {

// Parameters in device memory, row-major, the shapes of MoeParams; bf16 but the router bias.
struct DeviceMoeParams {
  const void* router = nullptr;        // [H, E] bf16
  const float* router_bias = nullptr;  // [E] f32, DeepSeek-V3 selection only (null: zeros)
  const void* w_up = nullptr;          // [E, H, 2F] bf16: columns [0, F) gate, [F, 2F) up
  const void* w_down = nullptr;        // [E, F, H] bf16
  const void* shared_up = nullptr;     // [S, H, 2F] bf16, when S > 0
  const void* shared_down = nullptr;   // [S, F, H] bf16
};

// Gradients in device memory, overwritten; null: not wanted (d_x is always computed).
struct DeviceMoeGrads {
  void* d_x = nullptr;            // [T, H] bf16
  float* d_router = nullptr;      // [H, E] f32
  void* d_w_up = nullptr;         // [E, H, 2F] bf16
  void* d_w_down = nullptr;       // [E, F, H] bf16
  void* d_shared_up = nullptr;    // [S, H, 2F] bf16
  void* d_shared_down = nullptr;  // [S, F, H] bf16
};

// Whether the layer fuses a step into one of its ragged dots: kAuto where that measured faster
// (each option says where), kOn wherever the backend can, kOff never.
enum class Fusion : std::uint8_t { kAuto, kOn, kOff };

struct DeviceMoeOptions {
  int device = 0;  // GPU ordinal
  // Backend of the routed experts' ragged dots (the router and the shared experts always use
  // `cuda`): "cuda", or "padded" for the capacity-padded baselines on the GPU.
  std::string expert_backend = "cuda";
  // padded only. A factor: MaxText's dropping path, capacity ceil(factor * T * k / E) rows per
  // expert, pairs beyond it contribute nothing. Unset: dropless (capacity = the largest group,
  // which makes each of those ragged dots wait for the group sizes on the host).
  std::optional<double> capacity_factor;
  // padded dropless only: the largest group its workspace holds (default T * k, which at full
  // model size asks for E times the routed activations).
  std::optional<std::int64_t> max_group_rows;
  PlanningEffort effort = PlanningEffort::kHeuristic;
  // The routed up projection reads its rows straight from x through the sort's token index
  // (PlanOptions::lhs_gather_rows) instead of after a gather kernel, where the cuda backend can
  // (Hopper, not Llama-4's scaled rows, not with expert parallelism): no [T k, H] copy of the
  // rows in forward (nor in backward where gather_in_up_weight_grad applies). The Hopper kernel runs
  // such tiles in CTA pairs, each gathering half of the rows. kAuto, the default, fuses where that
  // measured faster: up projections 2F of more than 256 and at most 4096 columns, where the
  // gather kernel's bytes are a large part of the projection, and x of at most 64 MiB, where the
  // measurements turned as x outgrew L2 (on an H100: qwen3-30b-a3b's forward 1.04-1.07x at 4096 and 8192 tokens,
  // deepseek-v3's 1.02-1.03x at 4096; forward + backward within 1%, since backward gathers the
  // rows then); not mixtral-8x7b's 28672 columns (0.93x), nor deepseek-v3 at 8192 tokens (112 MiB
  // of x: 0.99x). bench/RESULTS.md has the numbers.
  Fusion gather_in_up_gemm = Fusion::kAuto;
  // Backward: where the up projection reads x through the index (gather_in_up_gemm), its weight
  // gradient (mode 2) reads x so too, as the lhs rows it contracts over (PlanOptions::
  // lhs_gather_rows on a mode 2 op; the Hopper family's mode 2 tile copies them with cp.async), so
  // backward runs no gather kernel and writes no [T k, H] rows. kOff: backward gathers the rows
  // first, for the plain weight-gradient tile. kOn: wherever the cuda backend can. kAuto: for ffn
  // widths up to 1024, where it measured faster or about even (on an H200, qwen3-30b-a3b's gather plus weight
  // gradient 0.655 ms against 0.588 gathering in the tile at 4096 tokens, 1.010 against 1.026 at
  // 8192; deepseek-v3's, 2048 wide with groups of ~128 rows, 9.116 against 9.405).
  Fusion gather_in_up_weight_grad = Fusion::kAuto;
  // Backward: the routed down projection's data gradient reads dy straight through the sort's
  // token index (PlanOptions::lhs_gather_rows), before the combine weights, where the cuda backend
  // can (Hopper; not Llama-4, whose combine weight is 1). The activation's backward then applies
  // each row's combine weight and makes the weight's gradient as act . (dy W_down^T), which equals
  // dy . out: the combine's backward no longer reads the [T k, H] expert rows, and with
  // combine_in_down_gemm backward no longer runs the down projection again to make them. The
  // weight-scaled rows of dy are still written when the down weights' gradient is wanted. kAuto
  // uses it where that measured faster: ffn widths of 257 to 1024 columns and dy of at most
  // 64 MiB (on an H100, qwen3-30b-a3b's backward 0.06-0.07 ms faster at 4096 and 8192 tokens,
  // its 768-column gradient on one CTA per tile; deepseek-v3's 2048 columns a wash, mixtral-8x7b's
  // 14336 slower). Widths of 512 and 1024, which the Hopper kernel runs in CTA pairs, fall in the
  // rule untimed: no preset has them.
  Fusion gather_in_down_data_grad = Fusion::kAuto;
  // The routed up projection applies SwiGLU in its epilogue (PlanOptions::swiglu_epilogue) where
  // the cuda backend can (Hopper, not with expert parallelism; SwiGLU layers only: create refuses
  // it for a GeGLU layer): forward writes the activations [T k, F] directly, not the [T k, 2F]
  // product and then a SwiGLU kernel reading it back. The same values bit for bit. backward() needs the product: it runs the up projection again first (one
  // more ragged dot), so this is for inference, where forward runs alone.
  bool swiglu_in_up_gemm = false;
  // The routed down projection adds each expert row, times its combine weight, into its token's
  // output itself (PlanOptions::out_scatter_rows: f32 vector reductions into a [T, H] f32 sum)
  // where the cuda backend can (Hopper, not with expert parallelism), and a last kernel rounds the
  // sums (plus the shared experts' output) to the output: the [T k, H] expert rows are neither
  // written nor read back by the combine kernel. The sums' order is not fixed, so y may differ
  // from the default combine's (and from run to run) in the last bit of a few elements.
  // backward() needs the expert rows unless gather_in_down_data_grad applies: without it, backward
  // runs the down projection again first (one more ragged dot), so this is then for inference,
  // where forward runs alone. On an H200 (2026-12-05) it hung at
  // qwen3-30b-a3b's full size: an idle consumer warpgroup of the Hopper kernel let its warps drift
  // apart, and the scatter epilogue's long tail made one fall a ring behind. That is fixed
  // (03b0c37): the kernel's test at the layer's size passed on an H100 and the whole layer ran
  // with it at 4096 and 8192 tokens on an H200 (2026-12-06, bench/RESULTS.md). It is off by
  // default because it made that forward 4-5% slower.
  bool combine_in_down_gemm = false;
  // Expert parallelism (ragdot/ep_transport.hpp): this process's rank of a communicator whose GPU
  // is `device`, one process per GPU. The routed experts are split evenly over the ranks, rank r
  // holding experts [r E / W, (r + 1) E / W) of W ranks: DeviceMoeParams::w_up and w_down then hold
  // those experts only ([E / W, H, 2F] and [E / W, F, H]); the router and the shared experts are
  // whole on every rank. Each rank routes its own tokens, sends the rows of its (token, slot)
  // pairs to their experts' ranks, runs its experts on the rows it receives (grouped by local
  // expert) and sends them back, then combines. Forward only; one host sync per forward (the
  // exchange's sizes: NCCL takes them on the host), so not capturable in a CUDA graph. The rows a
  // rank can receive are bounded by W T k; the expert ragged dots are planned for T k, 2 T k,
  // 4 T k, ... up to W T k rows and the smallest that holds the received rows runs.
  // Null: every expert on this GPU.
  ep::Communicator* expert_parallel = nullptr;
};

// The last forward's routing, in device memory owned by the layer (valid until its next forward).
struct DeviceMoeRouting {
  const float* logits = nullptr;          // [T, E]
  const std::int32_t* experts = nullptr;  // [T, k]
  const float* weights = nullptr;         // [T, k] combine weights (Llama-4: 1)
  const float* input_scale = nullptr;     // [T] Llama-4: sigmoid of the top-1 logit; else 1
  const std::int32_t* group_sizes = nullptr;  // [E]
};

// The same, copied to the host (after waiting for the stream).
struct DeviceMoeRoutingStats {
  std::vector<std::int64_t> group_sizes;  // [E]
  std::int64_t largest_group = 0;
  std::int64_t empty_experts = 0;
  // pairs the padded dropping path leaves out at its capacity (0 on every other path)
  std::int64_t dropped_pairs = 0;
  std::int64_t capacity = 0;  // rows per expert of the dropping path; 0 elsewhere
};

struct DeviceMoeStepTime {
  std::string name;
  double ms = 0.0;  // median over the repetitions
};

struct DeviceMoeProfileOptions {
  int warmup = 2;
  int reps = 10;
  bool backward = true;  // also time forward + backward and the backward's steps
};

// Times from CUDA events on the caller's stream, medians over the repetitions.
struct DeviceMoeProfile {
  double forward_ms = 0.0;           // events around the forward only
  double forward_backward_ms = 0.0;  // forward then backward (0 without backward)
  // The same passes with an event between every two steps (adds a little to the total).
  std::vector<DeviceMoeStepTime> forward_steps, backward_steps;
  // One device-to-device copy of the sorted rows [T * k, H] bf16: one read and one write of the
  // routed activations, the memory traffic a permutation cannot go below.
  double rows_copy_ms = 0.0;
  std::size_t rows_bytes = 0;
};

class DeviceMoeLayer {
 public:
  // Plans every ragged dot of the layer for `tokens` tokens, loads the kernels and allocates the
  // activations, the sort's buffers and one workspace for all plans (device_bytes()).
  static Result<DeviceMoeLayer> create(const MoeConfig& config, std::int64_t tokens,
                                       const DeviceMoeOptions& options = {});

  // y [T, H] bf16 from x [T, H] bf16. Keeps what backward needs until the next forward.
  Status forward(const void* x, const DeviceMoeParams& params, void* y, void* stream);
  // The gradients of sum(y * dy) for the last forward's x and params; dy [T, H] bf16. Not with
  // expert parallelism (an `unsupported` error).
  Status backward(const void* x, const DeviceMoeParams& params, const void* dy, const DeviceMoeGrads& grads,
                  void* stream);

  // Runs forward (and backward) reps times with CUDA events; waits for the stream.
  Result<DeviceMoeProfile> profile(const void* x, const DeviceMoeParams& params, void* y, const void* dy,
                                   const DeviceMoeGrads& grads, void* stream,
                                   const DeviceMoeProfileOptions& options = {});

  DeviceMoeRouting routing() const;
  // Waits for `stream`, then copies the group sizes of the last forward to the host.
  Result<DeviceMoeRoutingStats> routing_stats(void* stream) const;

  const MoeConfig& config() const;
  std::int64_t tokens() const;
  std::size_t device_bytes() const;  // everything create allocated
  // Whether forward and backward may be captured in a CUDA graph (no plan waits for the host).
  bool graph_safe() const;
  std::string describe() const;  // one line per planned ragged dot

  DeviceMoeLayer(DeviceMoeLayer&&) noexcept;
  DeviceMoeLayer& operator=(DeviceMoeLayer&&) noexcept;
  ~DeviceMoeLayer();

 private:
  struct State;
  explicit DeviceMoeLayer(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Fills `count` elements (bf16, f16 or f32) of device memory on `stream` with uniform values in
// [-scale, scale) that depend only on (seed, index): uniform_fill_value() is the same on the host.
Status fill_device_uniform(int device, void* data, DType dtype, std::int64_t count, std::uint32_t seed, float scale,
                           void* stream);
// Element `index` of such a fill, in f32 (before rounding to the buffer's type).
float uniform_fill_value(std::uint32_t seed, std::uint64_t index, float scale);

}  // namespace ragdot::moe
