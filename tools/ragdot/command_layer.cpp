// ragdot layer: one whole MoE layer of a model preset (router, permutation, expert FFN on ragged
// dots, shared experts, combine), forward and forward + backward, beside the padded baselines:
// dropless (capacity = the largest group) and MaxText's dropping path (a capacity factor). On the
// CPU here (f32, MoeLayer); with --backend cuda on the GPU (bf16, DeviceMoeLayer: layer_gpu.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend_names.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "layer_gpu.hpp"
#include "preset_options.hpp"
#include "ragdot/moe.hpp"
#include "text_table.hpp"
#include "timing.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"

namespace ragdot::cli {

namespace {

constexpr double kWeightBudgetBytes = 256.0 * 1024 * 1024;

CommandHelp layer_help() {
  CommandHelp h;
  h.name = "layer";
  h.synopsis =
      "[--model PRESET] [--tokens N] [--shrink F] [--backend cpu|cpu_ref|cuda] [--activation A] [--capacity-factor F]";
  h.description =
      "Runs one Mixture-of-Experts layer of a model preset: the preset's router, a stable sort of the\n"
      "(token, slot) pairs by expert, the expert FFN as ragged dots (gate and up fused, the gated\n"
      "activation (SwiGLU, or GeGLU with --activation), down),\n"
      "the shared experts and the weighted combine; then its backward (gradients of the input, the\n"
      "router, the expert and the shared weights). Prints the median forward and forward + backward\n"
      "times beside the same layer on the padded baselines: dropless (capacity = the largest group)\n"
      "and the dropping path (capacity = factor * rows / experts, tokens beyond it dropped, as MaxText\n"
      "does). The exit status is 1 when the layer and the dropless baseline disagree.\n"
      "\n"
      "On the CPU (cpu, cpu_ref): f32 activations and weights, random values from --seed, a shrunk\n"
      "layer by default. With --backend cuda: the whole layer on the GPU in bf16 (router logits and\n"
      "weights f32) at full size, 4096 tokens by default, parameters filled on the device from --seed;\n"
      "times from CUDA events, the time of each step, the share of the permutation and the combine, and\n"
      "their memory time against one copy of the routed activations; the padded baselines run on the\n"
      "GPU (cuBLAS). --json writes every number.\n";
  h.options = {
      {"model", "PRESET", "model preset (default " + std::string(kDefaultModel) + "):\n" + preset_names()},
      {"tokens", "N", "tokens in the batch (default 512 on the CPU, 4096 on the GPU)"},
      {"shrink", "F", "divide hidden and expert ffn by F (CPU default: the smallest power of two >= 8\nthat keeps the expert weights under 256 MiB; GPU default 1)"},
      {"backend", "B", "where the layer runs: cpu (default), cpu_ref, or cuda (the GPU)"},
      {"activation", "A", "the experts' gated activation: swiglu (default, every preset's), geglu\n(gelu through erf) or geglu_tanh (gelu's tanh approximation)"},
      {"capacity-factor", "F", "the dropping baseline's capacity factor (default 1.25)"},
      {"seed", "N", "seed of the parameters and inputs (default 1)"},
      {"reps", "N", "timed repetitions, the median is reported (default 3 on the CPU, 10 on the GPU)"},
      {"warmup", "N", "GPU: untimed passes first (default 2)"},
      {"json", "FILE", "GPU: write the report as JSON"},
      {"no-baseline", "", "do not run the padded baselines"},
      {"fused-gather", "", "GPU: the up projection reads x through the sort's index instead of after\nthe gather kernel, wherever the cuda backend can (DeviceMoeOptions::gather_in_up_gemm;\nby default only where that measured faster: up projections of 257 to 4096 columns,\nx of at most 64 MiB)"},
      {"no-fused-gather", "", "GPU: the gather kernel first, everywhere"},
      {"fused-dy-gather", "", "GPU: backward's down projection reads dy through the sort's index for the\ndata gradient and the activation's backward makes the combine weights' gradient, so\nno step reads the expert outputs back, wherever the cuda backend can\n(DeviceMoeOptions::gather_in_down_data_grad; by default for ffn widths of 257 to 1024,\ndy of at most 64 MiB)"},
      {"no-fused-dy-gather", "", "GPU: the combine's backward first, everywhere"},
      {"fused-wgrad-gather", "", "GPU: where the up projection reads x through the sort's index, its weight\ngradient does too, wherever the cuda backend can (DeviceMoeOptions::\ngather_in_up_weight_grad; by default for ffn up to 1024)"},
      {"no-fused-wgrad-gather", "", "GPU: backward gathers the rows first for the up weight gradient"},
      {"fused-swiglu", "", "GPU: the up projection applies SwiGLU in its epilogue instead of a SwiGLU\nkernel after it (where the cuda backend can; DeviceMoeOptions::swiglu_in_up_gemm)"},
      {"fused-combine", "", "GPU: the down projection adds its weighted rows into the tokens' outputs\ninstead of the combine kernel reading them back (where the cuda backend can;\nDeviceMoeOptions::combine_in_down_gemm)"},
  };
  h.examples =
      "  ragdot layer\n"
      "  ragdot layer --model deepseek-v3 --tokens 256\n"
      "  ragdot layer --model qwen3-30b-a3b --capacity-factor 1.0\n"
      "  ragdot layer --model qwen3-30b-a3b --activation geglu\n"
      "  ragdot layer --backend cuda --model deepseek-v3 --tokens 8192 --json layer.json\n";
  return h;
}

std::vector<float> random_values(std::size_t n, double scale, workloads::SplitMix64& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(scale * rng.normal());
  return v;
}

std::int64_t default_shrink(const workloads::MoePreset& p) {
  for (std::int64_t s = 8;; s *= 2) {
    const bool divides = p.hidden % s == 0 && p.expert_ffn % s == 0;
    const double bytes = 3.0 * double(p.experts + p.shared_experts) * double(p.hidden / s) * double(p.expert_ffn / s) * 4;
    if (!divides) return s / 2;
    if (bytes <= kWeightBudgetBytes) return s;
  }
}

struct PathResult {
  std::string name;
  double forward_ms = 0, step_ms = 0;
  std::int64_t dropped = 0;
  std::vector<float> y;
};

}  // namespace

int command_layer(const std::vector<std::string>& args) {
  const CommandHelp help = layer_help();
  const ParsedOptions o = parse_options("layer", help.options, args);
  if (o.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }
  const workloads::MoePreset preset = parse_preset(o.get("model").value_or(kDefaultModel), "model");
  const std::string backend = o.has("backend") ? parse_backend_name(*o.get("backend"), "backend", false) : "cpu";
  if (backend != "cpu" && backend != "cpu_ref" && backend != "cuda")
    throw UsageError("--backend: the layer runs on the CPU (cpu or cpu_ref) or on the GPU (cuda)");
  const bool gpu = backend == "cuda";
  const std::int64_t tokens =
      o.has("tokens") ? parse_integer(*o.get("tokens"), "tokens", 1, 1 << 20) : (gpu ? 4096 : 512);
  const std::int64_t shrink = o.has("shrink") ? parse_integer(*o.get("shrink"), "shrink", 1, 1 << 16)
                                              : (gpu ? 1 : default_shrink(preset));
  const double factor = o.has("capacity-factor") ? parse_real(*o.get("capacity-factor"), "capacity-factor", 1e-3, 1e3) : 1.25;
  const std::uint64_t seed = o.has("seed") ? std::uint64_t(parse_integer(*o.get("seed"), "seed", 0, 1LL << 62)) : 1;
  const int reps = o.has("reps") ? int(parse_integer(*o.get("reps"), "reps", 1, 1000)) : (gpu ? 10 : 3);
  moe::GatedActivation activation = moe::GatedActivation::kSwiGLU;
  if (auto v = o.get("activation")) {
    auto parsed = moe::parse_activation(*v);
    if (!parsed.ok()) throw UsageError("--activation: " + parsed.status().message());
    activation = *parsed;
  }
  if (o.has("fused-swiglu") && activation != moe::GatedActivation::kSwiGLU)
    throw UsageError(std::string("--fused-swiglu fuses SwiGLU only, not --activation ") + moe::activation_name(activation));
  if (gpu) {
    GpuLayerRequest rq;
    rq.preset = preset;
    rq.tokens = tokens;
    rq.shrink = shrink;
    rq.activation = activation;
    rq.capacity_factor = factor;
    rq.seed = seed;
    rq.reps = reps;
    if (o.has("warmup")) rq.warmup = int(parse_integer(*o.get("warmup"), "warmup", 0, 1000));
    rq.baselines = !o.has("no-baseline");
    if (o.has("fused-gather") && o.has("no-fused-gather"))
      throw UsageError("--fused-gather and --no-fused-gather contradict each other");
    if (o.has("fused-gather")) rq.gather = moe::Fusion::kOn;
    if (o.has("no-fused-gather")) rq.gather = moe::Fusion::kOff;
    if (o.has("fused-dy-gather") && o.has("no-fused-dy-gather"))
      throw UsageError("--fused-dy-gather and --no-fused-dy-gather contradict each other");
    if (o.has("fused-dy-gather")) rq.gather_dy = moe::Fusion::kOn;
    if (o.has("no-fused-dy-gather")) rq.gather_dy = moe::Fusion::kOff;
    if (o.has("fused-wgrad-gather") && o.has("no-fused-wgrad-gather"))
      throw UsageError("--fused-wgrad-gather and --no-fused-wgrad-gather contradict each other");
    if (o.has("fused-wgrad-gather")) rq.gather_wgrad = moe::Fusion::kOn;
    if (o.has("no-fused-wgrad-gather")) rq.gather_wgrad = moe::Fusion::kOff;
    rq.fused_swiglu = o.has("fused-swiglu");
    rq.fused_combine = o.has("fused-combine");
    if (auto v = o.get("json")) {
      if (v->empty()) throw UsageError("--json needs a file name");
      rq.json_path = *v;
    }
    return run_gpu_layer(rq);
  }
  if (o.has("json") || o.has("warmup") || o.has("fused-gather") || o.has("no-fused-gather") ||
      o.has("fused-dy-gather") || o.has("no-fused-dy-gather") || o.has("fused-wgrad-gather") ||
      o.has("no-fused-wgrad-gather") || o.has("fused-swiglu") || o.has("fused-combine")) {
    throw UsageError("--json, --warmup and the --fused-* options go with --backend cuda");
  }

  auto config = moe::preset_config(preset.name, shrink);
  if (!config.ok()) throw UsageError(config.status().message());
  moe::MoeConfig c = *config;
  c.activation = activation;
  const std::size_t h = std::size_t(c.hidden), f = std::size_t(c.ffn), e = std::size_t(c.experts),
                    s = std::size_t(c.shared_experts), t = std::size_t(tokens);
  workloads::SplitMix64 rng(seed);
  const auto router = random_values(h * e, 1.0 / std::sqrt(double(h)), rng);
  const auto bias = random_values(e, 0.05, rng);
  const auto w_up = random_values(e * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  const auto w_down = random_values(e * f * h, 1.0 / std::sqrt(double(f)), rng);
  const auto s_up = random_values(s * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  const auto s_down = random_values(s * f * h, 1.0 / std::sqrt(double(f)), rng);
  const auto x = random_values(t * h, 1.0, rng);
  const auto dy = random_values(t * h, 1.0, rng);
  const moe::MoeParams params{router.data(), bias.data(), w_up.data(), w_down.data(), s_up.data(), s_down.data()};
  std::vector<float> dx(t * h), dr(h * e), dwu(w_up.size()), dwd(w_down.size()), dsu(s_up.size()), dsd(s_down.size());
  const moe::MoeGrads grads{dx.data(), dr.data(), dwu.data(), dwd.data(), dsu.data(), dsd.data()};

  std::printf("MoE layer %s / %lld: %lld tokens, hidden %lld, ffn %lld, %lld experts, top-%lld, %lld shared, %s, f32\n",
              preset.name.c_str(), (long long)shrink, (long long)tokens, (long long)c.hidden, (long long)c.ffn,
              (long long)c.experts, (long long)c.top_k, (long long)c.shared_experts, moe::activation_name(c.activation));

  auto run_path = [&](const std::string& name, const PlanOptions& po) -> Result<PathResult> {
    RAGDOT_ASSIGN_OR_RETURN(moe::MoeLayer layer, moe::MoeLayer::create(c, tokens, po));
    PathResult r;
    r.name = name;
    r.y.resize(t * h);
    const auto no_wait = [] { return Status::ok(); };
    TimingOptions to;
    to.reps = reps;
    RAGDOT_ASSIGN_OR_RETURN(Timing fwd,
                            time_median([&] { return layer.forward(x.data(), params, r.y.data()); }, no_wait, to));
    RAGDOT_ASSIGN_OR_RETURN(Timing step, time_median(
                                             [&] {
                                               RAGDOT_RETURN_IF_ERROR(layer.forward(x.data(), params, r.y.data()));
                                               return layer.backward(x.data(), params, dy.data(), grads);
                                             },
                                             no_wait, to));
    r.forward_ms = fwd.median_seconds * 1e3;
    r.step_ms = step.median_seconds * 1e3;
    r.dropped = layer.routing().dropped_pairs;
    return r;
  };

  std::vector<PathResult> results;
  PlanOptions ours;
  ours.backend = backend;
  auto main_path = run_path("ragdot (" + backend + ")", ours);
  if (!main_path.ok()) {
    std::fprintf(stderr, "ragdot: error: %s\n", main_path.status().to_string().c_str());
    return kExitFailure;
  }
  results.push_back(std::move(*main_path));
  bool agree = true;
  if (!o.has("no-baseline")) {
    PlanOptions dropless;
    dropless.backend = "padded";
    dropless.memory_space = MemorySpace::kHost;
    PlanOptions dropping = dropless;
    dropping.padded_capacity_factor = factor;
    char label[64];
    std::snprintf(label, sizeof label, "padded, capacity factor %.2f", factor);
    for (const auto& [name, po] : {std::pair<std::string, PlanOptions>{"padded, dropless", dropless},
                                   std::pair<std::string, PlanOptions>{label, dropping}}) {
      auto r = run_path(name, po);
      if (!r.ok()) {
        std::fprintf(stderr, "ragdot: error: %s: %s\n", name.c_str(), r.status().to_string().c_str());
        return kExitFailure;
      }
      results.push_back(std::move(*r));
    }
    // the dropless baseline computes the same layer: its output must match
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < t * h; ++i) {
      scale = std::max(scale, double(std::abs(results[1].y[i])));
      diff = std::max(diff, double(std::abs(results[0].y[i] - results[1].y[i])));
    }
    agree = diff <= 1e-4 * scale + 1e-6;
    std::printf("check against the dropless baseline: max |diff| %.3g of max |y| %.3g: %s\n", diff, scale,
                agree ? "ok" : "MISMATCH");
  }
  TextTable table;
  table.add_column("path");
  table.add_column("forward ms", TextTable::Align::kRight);
  table.add_column("fwd+bwd ms", TextTable::Align::kRight);
  table.add_column("pairs dropped", TextTable::Align::kRight);
  table.add_column("fwd+bwd speedup", TextTable::Align::kRight);
  for (const PathResult& r : results) {
    char fw[32], st[32], dr_s[48], sp[32];
    std::snprintf(fw, sizeof fw, "%.2f", r.forward_ms);
    std::snprintf(st, sizeof st, "%.2f", r.step_ms);
    std::snprintf(dr_s, sizeof dr_s, "%lld of %lld", (long long)r.dropped, (long long)(tokens * c.top_k));
    std::snprintf(sp, sizeof sp, "%.2fx", r.step_ms / results[0].step_ms);
    table.add_row({r.name, fw, st, dr_s, sp});
  }
  std::fputs(table.render().c_str(), stdout);
  std::puts("(speedup: ragdot's time relative to each path; above 1 means that path is slower)");
  return agree ? kExitOk : kExitFailure;
}

}  // namespace ragdot::cli
