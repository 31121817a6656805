#include "layer_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend_names.hpp"
#include "gemm_metrics.hpp"
#include "json_writer.hpp"
#include "memory_buffer.hpp"
#include "output_files.hpp"
#include "ragdot/moe_device.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "verify/check.hpp"

namespace ragdot::cli {

namespace {

// The line of DeviceMoeLayer::describe() that starts with `prefix` ("routed up: "), or "".
std::string plan_line(const std::string& describe, const std::string& prefix) {
  std::size_t at = describe.rfind("\n" + prefix);
  at = describe.compare(0, prefix.size(), prefix) == 0 ? 0 : at == std::string::npos ? at : at + 1;
  return at == std::string::npos ? std::string() : describe.substr(at, describe.find('\n', at) - at);
}

enum LayerTensor { kX = 1, kRouter, kRouterBias, kWUp, kWDown, kSharedUp, kSharedDown, kDy };

// The parameters, inputs and gradients of one layer in device memory, shared by every path.
struct DeviceTensors {
  MemoryBuffer x, dy, y, router, bias, w_up, w_down, s_up, s_down;
  MemoryBuffer d_x, d_router, d_w_up, d_w_down, d_s_up, d_s_down;
  bool shared = false;

  moe::DeviceMoeParams params() const {
    return {router.data(), static_cast<const float*>(bias.data()), w_up.data(), w_down.data(),
            shared ? s_up.data() : nullptr, shared ? s_down.data() : nullptr};
  }
  moe::DeviceMoeGrads grads() const {
    return {d_x.data(), static_cast<float*>(d_router.data()), d_w_up.data(), d_w_down.data(),
            shared ? d_s_up.data() : nullptr, shared ? d_s_down.data() : nullptr};
  }
};

Result<DeviceTensors> make_tensors(verify::MemoryOps& mem, const moe::MoeConfig& c, std::int64_t tokens,
                                   std::uint64_t seed) {
  const std::int64_t h = c.hidden, f = c.ffn, e = c.experts, s = c.shared_experts, t = tokens;
  DeviceTensors d;
  d.shared = s > 0;
  // (buffer, elements, dtype, tensor id for the values or 0 for an output, scale)
  const struct {
    MemoryBuffer* buffer;
    std::int64_t count;
    DType dtype;
    int tensor;
    double scale;
  } specs[] = {
      {&d.x, t * h, DType::kBF16, kX, 1.0},
      {&d.dy, t * h, DType::kBF16, kDy, 1.0},
      {&d.y, t * h, DType::kBF16, 0, 0},
      {&d.router, h * e, DType::kBF16, kRouter, 1.0 / std::sqrt(double(h))},
      {&d.bias, e, DType::kF32, kRouterBias, 0.05},
      {&d.w_up, e * h * 2 * f, DType::kBF16, kWUp, 1.0 / std::sqrt(double(h))},
      {&d.w_down, e * f * h, DType::kBF16, kWDown, 1.0 / std::sqrt(double(f))},
      {&d.s_up, s * h * 2 * f, DType::kBF16, kSharedUp, 1.0 / std::sqrt(double(h))},
      {&d.s_down, s * f * h, DType::kBF16, kSharedDown, 1.0 / std::sqrt(double(f))},
      {&d.d_x, t * h, DType::kBF16, 0, 0},
      {&d.d_router, h * e, DType::kF32, 0, 0},
      {&d.d_w_up, e * h * 2 * f, DType::kBF16, 0, 0},
      {&d.d_w_down, e * f * h, DType::kBF16, 0, 0},
      {&d.d_s_up, s * h * 2 * f, DType::kBF16, 0, 0},
      {&d.d_s_down, s * f * h, DType::kBF16, 0, 0},
  };
  for (const auto& sp : specs) {
    RAGDOT_ASSIGN_OR_RETURN(*sp.buffer, MemoryBuffer::allocate(mem, std::size_t(sp.count) * dtype_size(sp.dtype)));
    if (sp.tensor == 0 || sp.count == 0) continue;
    RAGDOT_RETURN_IF_ERROR(moe::fill_device_uniform(0, sp.buffer->data(), sp.dtype, sp.count,
                                                    layer_tensor_seed(seed, sp.tensor), float(sp.scale),
                                                    mem.stream()));
  }
  RAGDOT_RETURN_IF_ERROR(mem.synchronize());
  return d;
}

struct PathResult {
  std::string name, expert_backend;
  std::optional<double> capacity_factor;
  moe::DeviceMoeProfile profile;
  moe::DeviceMoeRoutingStats stats;
  std::string plans;
  std::size_t device_bytes = 0;
  std::vector<std::uint16_t> y;  // bf16, kept for the dropless check
  std::string error;
};

PathResult run_path(const std::string& name, const moe::DeviceMoeOptions& options, const moe::MoeConfig& c,
                    const GpuLayerRequest& rq, DeviceTensors& d, verify::MemoryOps& mem, bool keep_y) {
  PathResult r;
  r.name = name;
  r.expert_backend = options.expert_backend;
  r.capacity_factor = options.capacity_factor;
  std::fprintf(stderr, "ragdot layer: %s ...\n", name.c_str());
  auto layer = moe::DeviceMoeLayer::create(c, rq.tokens, options);
  if (!layer.ok()) {
    r.error = layer.status().to_string();
    return r;
  }
  r.plans = layer->describe();
  r.device_bytes = layer->device_bytes();
  // a fusion the cuda backend cannot make here (not Hopper, an override it does not take) falls
  // back to the default layer: say so rather than time the default under the fusion's name
  const struct {
    bool asked;
    const char* variant_says;
    const char* what;
    const char* gemm;  // the plan's line in describe()
  } fusions[] = {{options.gather_in_up_gemm == moe::Fusion::kOn, "gatherA", "the gather into the up projection",
                  "routed up: "},
                 {options.gather_in_down_data_grad == moe::Fusion::kOn, "gatherA",
                  "dy's gather into the down projection's data gradient", "routed d_act: "},
                 {options.gather_in_up_weight_grad == moe::Fusion::kOn, "gatherA",
                  "the gather into the up projection's weight gradient (it needs the up projection's)",
                  "routed d_w_up: "},
                 {options.swiglu_in_up_gemm, "swiglu", "the SwiGLU into the up projection", "routed up with SwiGLU"},
                 {options.combine_in_down_gemm, "scatter", "the combine into the down projection",
                  "routed down adding"}};
  for (const auto& f : fusions) {
    if (f.asked && plan_line(r.plans, f.gemm).find(f.variant_says) == std::string::npos) {
      r.error = std::string("not fused: the cuda backend cannot fuse ") + f.what + " here";
      return r;
    }
  }
  moe::DeviceMoeProfileOptions po;
  po.reps = rq.reps;
  po.warmup = rq.warmup;
  auto prof = layer->profile(d.x.data(), d.params(), d.y.data(), d.dy.data(), d.grads(), mem.stream(), po);
  if (!prof.ok()) {
    r.error = prof.status().to_string();
    return r;
  }
  r.profile = *prof;
  // the last pass was forward + backward on the same inputs: y is the layer's output
  auto stats = layer->routing_stats(mem.stream());
  if (!stats.ok()) {
    r.error = stats.status().to_string();
    return r;
  }
  r.stats = *stats;
  if (keep_y) {
    r.y.resize(std::size_t(rq.tokens * c.hidden));
    if (Status st = mem.download(r.y.data(), d.y.data(), r.y.size() * 2); !st.is_ok()) r.error = st.to_string();
  }
  return r;
}

double bf16_value(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ||a - b|| / ||b|| of two bf16 vectors.
double relative_error(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = bf16_value(a[i]), y = bf16_value(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

double steps_ms(const std::vector<moe::DeviceMoeStepTime>& steps, std::initializer_list<const char*> names) {
  double ms = 0;
  for (const auto& s : steps) {
    for (const char* n : names) {
      if (s.name == n) ms += s.ms;
    }
  }
  return ms;
}

double total_ms(const std::vector<moe::DeviceMoeStepTime>& steps) {
  double ms = 0;
  for (const auto& s : steps) ms += s.ms;
  return ms;
}

// (with the combine in the down projection: clearing the sums and the last rounding kernel; the
// additions themselves are in the down projection's time)
const std::initializer_list<const char*> kForwardPermutation = {"sort", "gather", "combine", "combine clear",
                                                                "combine finish"};
// backward's "gather": the sorted rows for the up projection's weight gradient, when forward read
// them straight from x (DeviceMoeOptions::gather_in_up_gemm)
const std::initializer_list<const char*> kBackwardPermutation = {"combine backward", "gather backward",
                                                                 "unpermute d_x", "gather"};

std::string steps_line(const std::vector<moe::DeviceMoeStepTime>& steps) {
  std::string s;
  for (const auto& st : steps) s += (s.empty() ? "" : ", ") + st.name + format(" %.3f", st.ms);
  return s;
}

void write_steps(JsonWriter& w, const char* key, const std::vector<moe::DeviceMoeStepTime>& steps) {
  w.key(key);
  w.begin_array();
  for (const auto& s : steps) {
    w.begin_object();
    w.field("name", s.name);
    w.field("ms", s.ms);
    w.end_object();
  }
  w.end_array();
}

struct Summary {
  double forward_share = 0, step_share = 0, gather_ms = 0, combine_ms = 0, permutation_fwd_ms = 0,
         permutation_bwd_ms = 0;
};

Summary summarize(const moe::DeviceMoeProfile& p) {
  Summary s;
  s.permutation_fwd_ms = steps_ms(p.forward_steps, kForwardPermutation);
  s.permutation_bwd_ms = steps_ms(p.backward_steps, kBackwardPermutation);
  const double fwd = total_ms(p.forward_steps), all = fwd + total_ms(p.backward_steps);
  s.forward_share = fwd > 0 ? s.permutation_fwd_ms / fwd : 0;
  s.step_share = all > 0 ? (s.permutation_fwd_ms + s.permutation_bwd_ms) / all : 0;
  // the gather kernel's time: forward's, or backward's when forward fused it into the up projection
  s.gather_ms = steps_ms(p.forward_steps, {"gather"});
  if (s.gather_ms == 0) s.gather_ms = steps_ms(p.backward_steps, {"gather"});
  s.combine_ms = steps_ms(p.forward_steps, {"combine"});
  return s;
}

std::string json_report(const GpuLayerRequest& rq, const moe::MoeConfig& c, const std::string& device,
                        const std::vector<PathResult>& paths, std::optional<double> check_error, bool check_ok) {
  JsonWriter w;
  w.begin_object();
  w.field("command", "layer");
  w.field("backend", "cuda");
  w.field("device", device);
  w.field("preset", rq.preset.name);
  w.field("tokens", rq.tokens);
  w.field("shrink", rq.shrink);
  w.field("hidden", c.hidden);
  w.field("ffn", c.ffn);
  w.field("experts", c.experts);
  w.field("top_k", c.top_k);
  w.field("shared_experts", c.shared_experts);
  w.field("activation", moe::activation_name(c.activation));
  w.field("dtype", "bf16");
  w.field("seed", (unsigned long long)rq.seed);
  w.field("reps", rq.reps);
  w.key("paths");
  w.begin_array();
  for (const PathResult& p : paths) {
    w.begin_object();
    w.field("name", p.name);
    w.field("expert_backend", p.expert_backend);
    if (p.capacity_factor) w.field("capacity_factor", *p.capacity_factor);
    if (!p.error.empty()) {
      w.field("error", p.error);
      w.end_object();
      continue;
    }
    w.field("forward_ms", p.profile.forward_ms);
    w.field("forward_backward_ms", p.profile.forward_backward_ms);
    w.field("dropped_pairs", p.stats.dropped_pairs);
    w.field("pairs", rq.tokens * c.top_k);
    w.field("capacity", p.stats.capacity);
    w.field("largest_group", p.stats.largest_group);
    w.field("empty_experts", p.stats.empty_experts);
    w.field("device_bytes", (long long)p.device_bytes);
    write_steps(w, "forward_steps", p.profile.forward_steps);
    write_steps(w, "backward_steps", p.profile.backward_steps);
    const Summary s = summarize(p.profile);
    w.field("permutation_forward_ms", s.permutation_fwd_ms);
    w.field("permutation_backward_ms", s.permutation_bwd_ms);
    w.field("permutation_share_forward", s.forward_share);
    w.field("permutation_share_forward_backward", s.step_share);
    w.field("rows_bytes", (long long)p.profile.rows_bytes);
    w.field("rows_copy_ms", p.profile.rows_copy_ms);
    // (no gather kernel when the up projection and its weight gradient read x through the index)
    if (s.gather_ms > 0 && p.profile.rows_copy_ms > 0) w.field("gather_over_copy", s.gather_ms / p.profile.rows_copy_ms);
    // (no combine kernel when the down projection combines: no ratio, rather than a 0 that reads as free)
    if (s.combine_ms > 0 && p.profile.rows_copy_ms > 0) w.field("combine_over_copy", s.combine_ms / p.profile.rows_copy_ms);
    w.field("plans", p.plans);
    w.end_object();
  }
  w.end_array();
  if (check_error) {
    w.key("check");
    w.begin_object();
    w.field("against", "padded, dropless");
    w.field("relative_error_y", *check_error);
    w.field("ok", check_ok);
    w.end_object();
  }
  w.end_object();
  return w.text() + "\n";
}

}  // namespace

std::uint32_t layer_tensor_seed(std::uint64_t seed, int tensor) { return std::uint32_t(seed * 16 + std::uint64_t(tensor)); }

int run_gpu_layer(const GpuLayerRequest& rq) {
  if (Status st = require_available("cuda"); !st.is_ok()) {
    std::fprintf(stderr, "ragdot layer: %s\n", st.message().c_str());
    return kExitFailure;
  }
  if (rq.json_path) {
    if (Status st = ensure_writable(*rq.json_path); !st.is_ok()) {
      std::fprintf(stderr, "ragdot layer: %s\n", st.message().c_str());
      return kExitFailure;
    }
  }
  std::string why;
  verify::MemoryOps* mem = verify::memory_for(MemorySpace::kDevice, &why);
  if (!mem) {
    std::fprintf(stderr, "ragdot layer: no GPU memory: %s\n", why.c_str());
    return kExitFailure;
  }
  auto config = moe::preset_config(rq.preset.name, rq.shrink);
  if (!config.ok()) throw UsageError(config.status().message());
  moe::MoeConfig c = *config;
  c.activation = rq.activation;
  const auto cuda = find_backend("cuda");
  const std::string device = cuda ? cuda->detail : "";
  std::printf("MoE layer %s%s: %lld tokens, hidden %lld, ffn %lld, %lld experts, top-%lld, %lld shared, %s, bf16 on %s\n",
              rq.preset.name.c_str(), rq.shrink > 1 ? format(" / %lld", (long long)rq.shrink).c_str() : "",
              (long long)rq.tokens, (long long)c.hidden, (long long)c.ffn, (long long)c.experts, (long long)c.top_k,
              (long long)c.shared_experts, moe::activation_name(c.activation), device.c_str());
  auto tensors = make_tensors(*mem, c, rq.tokens, rq.seed);
  if (!tensors.ok()) {
    std::fprintf(stderr, "ragdot layer: error: %s\n", tensors.status().to_string().c_str());
    return kExitFailure;
  }

  std::vector<PathResult> paths;
  moe::DeviceMoeOptions ours_options;
  ours_options.gather_in_up_gemm = rq.gather;
  ours_options.gather_in_down_data_grad = rq.gather_dy;
  ours_options.gather_in_up_weight_grad = rq.gather_wgrad;
  ours_options.swiglu_in_up_gemm = rq.fused_swiglu;
  ours_options.combine_in_down_gemm = rq.fused_combine;
  std::string ours_name = "ragdot (cuda)";
  if (rq.gather == moe::Fusion::kOn) ours_name += ", gather fused into the up projection";
  if (rq.gather == moe::Fusion::kOff) ours_name += ", gather kernel first";
  if (rq.gather_dy == moe::Fusion::kOn) ours_name += ", dy gathered in the down projection's data gradient";
  if (rq.gather_dy == moe::Fusion::kOff) ours_name += ", combine backward first";
  if (rq.gather_wgrad == moe::Fusion::kOn) ours_name += ", x gathered in the up weight gradient";
  if (rq.gather_wgrad == moe::Fusion::kOff) ours_name += ", rows gathered first for the up weight gradient";
  if (rq.fused_swiglu) ours_name += ", SwiGLU fused into the up projection";
  if (rq.fused_combine) ours_name += ", combine fused into the down projection";
  paths.push_back(run_path(ours_name, ours_options, c, rq, *tensors, *mem, rq.baselines));
  if (!paths[0].error.empty()) {
    std::fprintf(stderr, "ragdot layer: error: %s\n", paths[0].error.c_str());
    return kExitFailure;
  }
  std::optional<double> check_error;
  bool check_ok = true;
  if (rq.baselines) {
    // dropless: its workspace holds the largest group of this routing (the same inputs, the same routing)
    moe::DeviceMoeOptions dropless;
    dropless.expert_backend = "padded";
    dropless.max_group_rows = paths[0].stats.largest_group;
    paths.push_back(run_path("padded, dropless", dropless, c, rq, *tensors, *mem, true));
    moe::DeviceMoeOptions dropping;
    dropping.expert_backend = "padded";
    dropping.capacity_factor = rq.capacity_factor;
    paths.push_back(run_path(format("padded, capacity factor %.2f", rq.capacity_factor), dropping, c, rq, *tensors,
                             *mem, false));
    // ragdot with the other of the gather's two paths: the up projection reading x through the
    // sort's index, or the gather kernel first (whichever ragdot's path did not take): what the
    // fusion gains or costs here
    if (plan_line(paths[0].plans, "routed up: ").find("gatherA") != std::string::npos) {
      moe::DeviceMoeOptions first;
      first.gather_in_up_gemm = moe::Fusion::kOff;
      paths.push_back(run_path("ragdot (cuda), gather kernel first", first, c, rq, *tensors, *mem, false));
    } else {
      moe::DeviceMoeOptions fused;
      fused.gather_in_up_gemm = moe::Fusion::kOn;
      paths.push_back(run_path("ragdot (cuda), gather fused into the up projection", fused, c, rq, *tensors, *mem,
                               false));
    }
    // and with SwiGLU in the up projection's epilogue (forward: no [T k, 2F] product written and
    // read back; backward runs the up projection again), for a SwiGLU layer
    if (!rq.fused_swiglu && c.activation == moe::GatedActivation::kSwiGLU) {
      moe::DeviceMoeOptions fused;
      fused.swiglu_in_up_gemm = true;
      paths.push_back(run_path("ragdot (cuda), SwiGLU fused into the up projection", fused, c, rq, *tensors, *mem,
                               false));
    }
    // (The combine in the down projection's epilogue runs only when asked for, --fused-combine: on
    // an H200 it made qwen3-30b-a3b's forward 4-5% slower, bench/RESULTS.md.)
    if (paths[1].error.empty()) {
      check_error = relative_error(paths[0].y, paths[1].y);
      check_ok = *check_error <= 1e-2;
      std::printf("check against the dropless baseline: relative error of y %.3g: %s\n", *check_error,
                  check_ok ? "ok" : "MISMATCH");
    }
  }
  const PathResult& ours = paths[0];
  std::printf("routing: largest group %lld rows, %lld of %lld experts empty\n", (long long)ours.stats.largest_group,
              (long long)ours.stats.empty_experts, (long long)c.experts);

  TextTable table;
  table.add_column("path");
  table.add_column("forward ms", TextTable::Align::kRight);
  table.add_column("fwd+bwd ms", TextTable::Align::kRight);
  table.add_column("pairs dropped", TextTable::Align::kRight);
  table.add_column("fwd speedup", TextTable::Align::kRight);
  table.add_column("fwd+bwd speedup", TextTable::Align::kRight);
  for (const PathResult& p : paths) {
    if (!p.error.empty()) {
      table.add_row({p.name, "error", "-", "-", "-", "-"});
      continue;
    }
    table.add_row({p.name, format("%.3f", p.profile.forward_ms), format("%.3f", p.profile.forward_backward_ms),
                   format("%lld of %lld", (long long)p.stats.dropped_pairs, (long long)(rq.tokens * c.top_k)),
                   format_speedup(p.profile.forward_ms / ours.profile.forward_ms),
                   format_speedup(p.profile.forward_backward_ms / ours.profile.forward_backward_ms)});
  }
  std::fputs(table.render().c_str(), stdout);
  std::puts("(speedup: each path's time over ragdot's; above 1 means that path is slower)");
  for (const PathResult& p : paths) {
    if (!p.error.empty()) std::printf("error %s: %s\n", p.name.c_str(), p.error.c_str());
  }

  const Summary s = summarize(ours.profile);
  std::printf("\nragdot forward steps (ms): %s\n", steps_line(ours.profile.forward_steps).c_str());
  std::printf("ragdot backward steps (ms): %s\n", steps_line(ours.profile.backward_steps).c_str());
  std::printf("permutation + combine (sort, gather unless the up projection reads x through the index, combine; "
              "backward: their gradients and the gather for the up weight gradient, if any): %.3f ms = %.1f%% of the "
              "forward, %.3f ms = %.1f%% of forward + backward (shares of the per-step times)\n",
              s.permutation_fwd_ms, 100 * s.forward_share, s.permutation_fwd_ms + s.permutation_bwd_ms,
              100 * s.step_share);
  const double copy = ours.profile.rows_copy_ms;
  std::printf("memory: one copy of the routed activations [%lld, %lld] (%s read + written) takes %.3f ms; %s, %s\n",
              (long long)(rq.tokens * c.top_k), (long long)c.hidden, format_bytes(double(ours.profile.rows_bytes)).c_str(),
              copy,
              s.gather_ms > 0 ? format("the gather takes %.2fx that", copy > 0 ? s.gather_ms / copy : 0.0).c_str()
                              : "no gather kernel (the up projection and its weight gradient read x through the index)",
              s.combine_ms > 0 ? format("the combine %.2fx", copy > 0 ? s.combine_ms / copy : 0.0).c_str()
                               : "no combine kernel (the down projection adds the rows)");

  bool ok = check_ok;
  if (rq.json_path) {
    if (Status st = write_text_file(*rq.json_path, json_report(rq, c, device, paths, check_error, check_ok));
        !st.is_ok()) {
      std::fprintf(stderr, "ragdot layer: %s\n", st.message().c_str());
      ok = false;
    } else {
      std::printf("wrote %s\n", rq.json_path->c_str());
    }
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace ragdot::cli
