// The device MoE layer (ragdot/moe_device.hpp) against the host layer (ragdot/moe.hpp, f32 on
// the cpu backend) for every preset at small sizes, forward and backward: both get the same
// bf16-representable parameters and inputs, so only accumulation order and the device's bf16
// intermediates differ (relative Frobenius error under 1e-2). Inputs and router weights are
// dyadic rationals of a few bits, so the router logits are exact on both sides and routing must
// match pair for pair. Outputs and gradients are poisoned before every run. Also: a CUDA graph of
// forward + backward replayed on new inputs (new routing, new group sizes), the GPU padded
// baselines (dropless, and a capacity factor with its dropped pairs), and bad arguments.
// Label "gpu": skipped (not failed) where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "gpu_test_support.hpp"
#include "moe_device_support.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/moe_device.hpp"

namespace ragdot {
namespace {

using gpu_test::gpu;
using namespace moe_test;  // NOLINT
using workloads::RouterKind;

struct HostParams {
  std::vector<float> router, bias, w_up, w_down, s_up, s_down;
};

// One layer's inputs on the host, every value exactly representable in bf16.
struct LayerData {
  moe::MoeConfig c;
  std::int64_t t = 0;
  HostParams p;
  std::vector<float> x, dy;
};

std::vector<float> bf16_normal(std::size_t n, double scale, workloads::SplitMix64& rng) {
  std::vector<float> v(n);
  for (auto& e : v) e = round_bf16(float(scale * rng.normal()));
  return v;
}

// Integers in [-range, range] times 2^-shift: exact in bf16 for range < 256, and their products
// sum exactly in f32 at these sizes whatever the order.
std::vector<float> dyadic(std::size_t n, int range, int shift, workloads::SplitMix64& rng) {
  std::vector<float> v(n);
  for (auto& e : v) e = std::ldexp(float(int(rng.uniform() * (2 * range + 1)) - range), -shift);
  return v;
}

LayerData make_data(const moe::MoeConfig& c, std::int64_t tokens, std::uint64_t seed) {
  workloads::SplitMix64 rng(seed);
  LayerData d;
  d.c = c;
  d.t = tokens;
  const std::size_t h = std::size_t(c.hidden), f = std::size_t(c.ffn), e = std::size_t(c.experts),
                    s = std::size_t(c.shared_experts), t = std::size_t(tokens);
  // x: multiples of 1/16 in [-2, 2]; router: multiples of 2^-shift up to 127 of them, so that the
  // logits' spread is about 1.5 whatever the hidden size
  const int shift = int(std::lround(std::log2(56.0 * std::sqrt(double(h)))));
  d.x = dyadic(t * h, 32, 4, rng);
  d.p.router = dyadic(h * e, 127, shift, rng);
  if (c.router == RouterKind::kDeepSeekV3) d.p.bias = dyadic(e, 8, 6, rng);
  d.p.w_up = bf16_normal(e * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  d.p.w_down = bf16_normal(e * f * h, 1.0 / std::sqrt(double(f)), rng);
  d.p.s_up = bf16_normal(s * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  d.p.s_down = bf16_normal(s * f * h, 1.0 / std::sqrt(double(f)), rng);
  d.dy = bf16_normal(t * h, 1.0, rng);
  return d;
}

// Everything a layer run produces that the tests compare, as f32 on the host.
struct LayerResult {
  std::vector<float> y, d_x, d_router, d_w_up, d_w_down, d_s_up, d_s_down;
  std::vector<std::int32_t> experts;
  std::vector<std::int64_t> group_sizes;
};

PlanOptions host_cpu() {
  PlanOptions po;
  po.backend = "cpu";
  return po;
}

LayerResult run_host_layer(const LayerData& d, std::string* error, const PlanOptions& po = host_cpu()) {
  LayerResult r;
  auto layer = moe::MoeLayer::create(d.c, d.t, po);
  if (!layer.ok()) {
    *error = layer.status().to_string();
    return r;
  }
  const std::size_t th = d.x.size();
  r.y.resize(th);
  r.d_x.resize(th);
  r.d_router.resize(d.p.router.size());
  r.d_w_up.resize(d.p.w_up.size());
  r.d_w_down.resize(d.p.w_down.size());
  r.d_s_up.resize(d.p.s_up.size());
  r.d_s_down.resize(d.p.s_down.size());
  const bool shared = d.c.shared_experts > 0;
  const moe::MoeParams params{d.p.router.data(), d.p.bias.empty() ? nullptr : d.p.bias.data(), d.p.w_up.data(),
                              d.p.w_down.data(),  shared ? d.p.s_up.data() : nullptr,
                              shared ? d.p.s_down.data() : nullptr};
  const moe::MoeGrads grads{r.d_x.data(),    r.d_router.data(), r.d_w_up.data(), r.d_w_down.data(),
                            shared ? r.d_s_up.data() : nullptr, shared ? r.d_s_down.data() : nullptr};
  Status st = layer->forward(d.x.data(), params, r.y.data());
  if (st.is_ok()) st = layer->backward(d.x.data(), params, d.dy.data(), grads);
  if (!st.is_ok()) *error = st.to_string();
  r.experts = layer->routing().experts;
  r.group_sizes = layer->routing().group_sizes;
  return r;
}

std::unique_ptr<DeviceBuffer> device_bf16(const std::vector<float>& v) {
  auto b = std::make_unique<DeviceBuffer>(v.size() * 2);
  upload(*b, from_f32(v, DType::kBF16));
  return b;
}

// The layer's parameters, inputs and gradients in device memory.
struct DeviceLayerData {
  std::unique_ptr<DeviceBuffer> router, bias, w_up, w_down, s_up, s_down, x, dy;
  std::unique_ptr<DeviceBuffer> y, d_x, d_router, d_w_up, d_w_down, d_s_up, d_s_down;
  const LayerData* host = nullptr;

  explicit DeviceLayerData(const LayerData& d) : host(&d) {
    router = device_bf16(d.p.router);
    bias = std::make_unique<DeviceBuffer>(std::max<std::size_t>(d.p.bias.size(), 1) * 4);
    if (!d.p.bias.empty()) upload(*bias, d.p.bias);
    w_up = device_bf16(d.p.w_up);
    w_down = device_bf16(d.p.w_down);
    s_up = device_bf16(d.p.s_up);
    s_down = device_bf16(d.p.s_down);
    x = device_bf16(d.x);
    dy = device_bf16(d.dy);
    y = std::make_unique<DeviceBuffer>(d.x.size() * 2);
    d_x = std::make_unique<DeviceBuffer>(d.x.size() * 2);
    d_router = std::make_unique<DeviceBuffer>(d.p.router.size() * 4);
    d_w_up = std::make_unique<DeviceBuffer>(d.p.w_up.size() * 2);
    d_w_down = std::make_unique<DeviceBuffer>(d.p.w_down.size() * 2);
    d_s_up = std::make_unique<DeviceBuffer>(d.p.s_up.size() * 2);
    d_s_down = std::make_unique<DeviceBuffer>(d.p.s_down.size() * 2);
  }
  bool shared() const { return host->c.shared_experts > 0; }
  moe::DeviceMoeParams params() const {
    return {router->p, host->p.bias.empty() ? nullptr : static_cast<const float*>(bias->p), w_up->p, w_down->p,
            shared() ? s_up->p : nullptr, shared() ? s_down->p : nullptr};
  }
  moe::DeviceMoeGrads grads() const {
    return {d_x->p, static_cast<float*>(d_router->p), d_w_up->p, d_w_down->p, shared() ? d_s_up->p : nullptr,
            shared() ? d_s_down->p : nullptr};
  }
  void poison_outputs() {
    poison(*y, host->x.size() * 2);
    poison(*d_x, host->x.size() * 2);
    poison(*d_router, host->p.router.size() * 4);
    poison(*d_w_up, host->p.w_up.size() * 2);
    poison(*d_w_down, host->p.w_down.size() * 2);
    poison(*d_s_up, host->p.s_up.size() * 2);
    poison(*d_s_down, host->p.s_down.size() * 2);
  }
  std::vector<float> bf16_of(const DeviceBuffer& b, std::size_t n) const {
    return as_f32(download<unsigned char>(b, n * 2), DType::kBF16);
  }
  LayerResult results(const moe::DeviceMoeLayer& layer) const {
    LayerResult r;
    const std::size_t th = host->x.size();
    r.y = bf16_of(*y, th);
    r.d_x = bf16_of(*d_x, th);
    r.d_router = download<float>(*d_router, host->p.router.size());
    r.d_w_up = bf16_of(*d_w_up, host->p.w_up.size());
    r.d_w_down = bf16_of(*d_w_down, host->p.w_down.size());
    if (shared()) {
      r.d_s_up = bf16_of(*d_s_up, host->p.s_up.size());
      r.d_s_down = bf16_of(*d_s_down, host->p.s_down.size());
    }
    r.experts.resize(std::size_t(host->t * host->c.top_k));
    EXPECT_TRUE(gpu()->download(r.experts.data(), layer.routing().experts, r.experts.size() * 4).is_ok());
    auto stats = layer.routing_stats(gpu()->stream());
    EXPECT_TRUE(stats.ok()) << stats.status().to_string();
    if (stats.ok()) r.group_sizes = stats->group_sizes;
    return r;
  }
};

Status run_device_layer(moe::DeviceMoeLayer& layer, DeviceLayerData& d) {
  d.poison_outputs();
  RAGDOT_RETURN_IF_ERROR(layer.forward(d.x->p, d.params(), d.y->p, gpu()->stream()));
  RAGDOT_RETURN_IF_ERROR(layer.backward(d.x->p, d.params(), d.dy->p, d.grads(), gpu()->stream()));
  return gpu()->synchronize();
}

void expect_close(const LayerResult& got, const LayerResult& want, double tol, const std::string& what,
                  bool compare_routing = true) {
  if (compare_routing) {
    EXPECT_EQ(got.group_sizes, want.group_sizes) << what;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < want.experts.size() && i < got.experts.size(); ++i) differ += got.experts[i] != want.experts[i];
    EXPECT_EQ(differ, 0u) << what << ": pairs routed differently";
  }
  const struct {
    const char* name;
    const std::vector<float>&g, &w;
  } outs[] = {{"y", got.y, want.y},
              {"d_x", got.d_x, want.d_x},
              {"d_router", got.d_router, want.d_router},
              {"d_w_up", got.d_w_up, want.d_w_up},
              {"d_w_down", got.d_w_down, want.d_w_down},
              {"d_shared_up", got.d_s_up, want.d_s_up},
              {"d_shared_down", got.d_s_down, want.d_s_down}};
  for (const auto& o : outs) {
    if (o.w.empty()) continue;
    bool finite = true;
    for (float v : o.g) finite = finite && std::isfinite(v);
    EXPECT_TRUE(finite) << what << " " << o.name << ": unwritten (poisoned) or non-finite values";
    EXPECT_LT(rel_frobenius(o.g, o.w), tol) << what << " " << o.name;
  }
}

// The line of describe() for one of the layer's ragged dots ("routed up: ..."), or "".
std::string plan_line(const std::string& describe, const std::string& gemm) {
  const std::size_t at = describe.find(gemm + ": ");
  return at == std::string::npos ? std::string() : describe.substr(at, describe.find('\n', at) - at);
}

// Two layers' results byte for byte (the same products in the same order): routing, y and every gradient.
void expect_same_bytes(const LayerResult& got, const LayerResult& want, const std::string& what) {
  EXPECT_EQ(got.group_sizes, want.group_sizes) << what;
  EXPECT_TRUE(got.y == want.y) << what;
  EXPECT_TRUE(got.d_x == want.d_x) << what;
  EXPECT_TRUE(got.d_router == want.d_router) << what;
  EXPECT_TRUE(got.d_w_up == want.d_w_up) << what;
  EXPECT_TRUE(got.d_w_down == want.d_w_down) << what;
  EXPECT_TRUE(got.d_s_up == want.d_s_up) << what;
  EXPECT_TRUE(got.d_s_down == want.d_s_down) << what;
}

struct PresetCase {
  const char* preset;
  std::int64_t shrink, tokens;
  moe::GatedActivation activation = moe::GatedActivation::kSwiGLU;
};

class DeviceMoeLayerTest : public ::testing::TestWithParam<PresetCase> {};

TEST_P(DeviceMoeLayerTest, ForwardAndBackwardMatchTheHostLayer) {
  REQUIRE_GPU();
  const PresetCase pc = GetParam();
  auto config = moe::preset_config(pc.preset, pc.shrink);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  config->activation = pc.activation;
  const LayerData data = make_data(*config, pc.tokens, std::hash<std::string>{}(pc.preset));
  std::string error;
  const LayerResult want = run_host_layer(data, &error);
  ASSERT_TRUE(error.empty()) << error;

  auto layer = moe::DeviceMoeLayer::create(*config, pc.tokens);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  EXPECT_TRUE(layer->graph_safe()) << layer->describe();
  DeviceLayerData dev(data);
  // twice: the second run reuses everything the first left behind
  for (int run = 0; run < 2; ++run) {
    Status st = run_device_layer(*layer, dev);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    expect_close(dev.results(*layer), want, 1e-2,
                 std::string(pc.preset) + " " + moe::activation_name(pc.activation) + " run " + std::to_string(run));
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, DeviceMoeLayerTest,
                         ::testing::Values(PresetCase{"mixtral-8x7b", 16, 512}, PresetCase{"deepseek-v3", 16, 64},
                                           PresetCase{"llama4-scout", 16, 200}, PresetCase{"qwen3-30b-a3b", 16, 96},
                                           PresetCase{"qwen3-30b-a3b", 16, 80, moe::GatedActivation::kGeGLU},
                                           PresetCase{"llama4-scout", 16, 72, moe::GatedActivation::kGeGLUTanh}),
                         [](const auto& info) {
                           std::string n = info.param.preset;
                           if (info.param.activation != moe::GatedActivation::kSwiGLU)
                             n += std::string("_") + moe::activation_name(info.param.activation);
                           for (char& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

// The up projection reading x through the sort's token index (DeviceMoeOptions::gather_in_up_gemm)
// against the gather kernel then the plain up projection (the default): the same products in the
// same order, so the same bytes, forward and backward. At this size (128 rows per expert, an up
// projection 384 wide) the Hopper family takes the up projection in CTA pairs along n, each
// gathering half of the rows, and backward's weight gradient of it reads x through the index too
// (gather_in_up_weight_grad: the mode 2 tile with its k rows gathered; with kOff, after the gather
// kernel); elsewhere both layers gather first and the test still holds.
TEST(DeviceMoeLayer, GatheredUpProjectionGivesTheBytesOfGatherFirst) {
  REQUIRE_GPU();
  auto config = moe::preset_config("qwen3-30b-a3b", 4);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  const std::int64_t tokens = 2048;
  const LayerData data = make_data(*config, tokens, 77);
  moe::DeviceMoeOptions gathering;
  gathering.gather_in_up_gemm = moe::Fusion::kOn;
  moe::DeviceMoeOptions first;
  first.gather_in_up_gemm = moe::Fusion::kOff;
  auto fused = moe::DeviceMoeLayer::create(*config, tokens, gathering);
  auto plain = moe::DeviceMoeLayer::create(*config, tokens, first);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->describe().find("gatherA"), std::string::npos) << plain->describe();
  auto dev = cuda::device(0);
  ASSERT_TRUE(dev.ok());
  gathering.gather_in_up_weight_grad = moe::Fusion::kOff;
  auto gather_for_wgrad = moe::DeviceMoeLayer::create(*config, tokens, gathering);
  ASSERT_TRUE(gather_for_wgrad.ok()) << gather_for_wgrad.status().to_string();
  if ((*dev)->traits.cc_major == 9) {
    EXPECT_NE(plan_line(fused->describe(), "routed up").find("gatherA cluster2n"), std::string::npos)
        << fused->describe();
    const std::string wgrad = plan_line(fused->describe(), "routed d_w_up");
    EXPECT_TRUE(wgrad.find("mode2") != std::string::npos && wgrad.find("gatherA") != std::string::npos)
        << fused->describe();
    EXPECT_EQ(plan_line(gather_for_wgrad->describe(), "routed d_w_up").find("gatherA"), std::string::npos);
  }
  DeviceLayerData d(data);
  ASSERT_TRUE(run_device_layer(*plain, d).is_ok());
  const LayerResult b = d.results(*plain);
  ASSERT_FALSE(b.y.empty());
  for (auto* layer : {&*fused, &*gather_for_wgrad}) {
    ASSERT_TRUE(run_device_layer(*layer, d).is_ok());
    const LayerResult a = d.results(*layer);
    expect_same_bytes(a, b, layer == &*fused ? "x gathered in the weight gradient" : "rows gathered for it");
  }
}

// Backward reading dy through the token index in the down projection's data gradient
// (DeviceMoeOptions::gather_in_down_data_grad): the activation's backward applies the combine
// weights and makes their gradient from act . (dy W_down^T) instead of dy . out, so the gradients
// differ from the default path's in rounding only; both against the host layer. Also with the
// combine in the down projection (backward then runs no down projection again: no "down again"
// step) and the SwiGLU in the up projection. On Hopper the gradient's plan must really gather.
TEST(DeviceMoeLayer, GatheredDownGradientMatchesTheHostLayer) {
  REQUIRE_GPU();
  auto dev = cuda::device(0);
  ASSERT_TRUE(dev.ok());
  const bool hopper = (*dev)->traits.cc_major == 9;
  const struct {
    const char* preset;
    std::int64_t tokens;
  } cases[] = {{"qwen3-30b-a3b", 96}, {"deepseek-v3", 64}, {"mixtral-8x7b", 512}};
  for (const auto& pc : cases) {
    auto config = moe::preset_config(pc.preset, 16);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    const LayerData data = make_data(*config, pc.tokens, 91);
    std::string error;
    const LayerResult want = run_host_layer(data, &error);
    ASSERT_TRUE(error.empty()) << error;
    DeviceLayerData d(data);
    for (bool fused_ends : {false, true}) {
      moe::DeviceMoeOptions options;
      options.gather_in_down_data_grad = moe::Fusion::kOn;
      options.combine_in_down_gemm = fused_ends;
      options.swiglu_in_up_gemm = fused_ends;
      auto layer = moe::DeviceMoeLayer::create(*config, pc.tokens, options);
      ASSERT_TRUE(layer.ok()) << layer.status().to_string();
      const std::string what = std::string(pc.preset) + (fused_ends ? " with the combine and SwiGLU fused" : "");
      if (hopper) {
        EXPECT_NE(plan_line(layer->describe(), "routed d_act").find("gatherA"), std::string::npos)
            << what << "\n" << layer->describe();
      }
      LayerResult full;
      for (int run = 0; run < 2; ++run) {
        ASSERT_TRUE(run_device_layer(*layer, d).is_ok()) << what;
        full = d.results(*layer);
        expect_close(full, want, 1e-2, what + " run " + std::to_string(run));
      }
      // without the down weights' gradient (no scaled rows written): the others unchanged
      {
        d.poison_outputs();
        moe::DeviceMoeGrads no_down = d.grads();
        no_down.d_w_down = nullptr;
        ASSERT_TRUE(layer->forward(d.x->p, d.params(), d.y->p, gpu()->stream()).is_ok());
        ASSERT_TRUE(layer->backward(d.x->p, d.params(), d.dy->p, no_down, gpu()->stream()).is_ok());
        ASSERT_TRUE(gpu()->synchronize().is_ok());
        const LayerResult part = d.results(*layer);
        EXPECT_TRUE(part.d_x == full.d_x) << what << ", no d_w_down";
        EXPECT_TRUE(part.d_router == full.d_router) << what << ", no d_w_down";
        EXPECT_TRUE(part.d_w_up == full.d_w_up) << what << ", no d_w_down";
      }
      if (hopper) {
        moe::DeviceMoeProfileOptions po;
        po.warmup = 0;
        po.reps = 1;
        auto prof = layer->profile(d.x->p, d.params(), d.y->p, d.dy->p, d.grads(), gpu()->stream(), po);
        ASSERT_TRUE(prof.ok()) << prof.status().to_string();
        for (const auto& step : prof->backward_steps) EXPECT_NE(step.name, "down again") << what;
      }
    }
  }
  // and the switch: off gathers nothing in backward's down projection, Llama-4 never
  for (const char* preset : {"qwen3-30b-a3b", "llama4-scout"}) {
    auto config = moe::preset_config(preset, 16);
    ASSERT_TRUE(config.ok());
    moe::DeviceMoeOptions options;
    options.gather_in_up_gemm = moe::Fusion::kOff;
    options.gather_in_down_data_grad = std::string(preset) == "llama4-scout" ? moe::Fusion::kOn : moe::Fusion::kOff;
    auto layer = moe::DeviceMoeLayer::create(*config, 64, options);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    EXPECT_EQ(layer->describe().find("gatherA"), std::string::npos) << preset << "\n" << layer->describe();
  }
}

// For each preset (1/16 of its size, 1024 tokens): the default layer's forward and backward, then
// check(preset, config, inputs, results, hopper), which runs other forms of the layer on the same
// inputs and compares them with those results.
constexpr std::int64_t kFusedTokens = 1024;
template <class Check>
void against_the_default_layer(std::initializer_list<const char*> presets, std::uint64_t seed, Check check) {
  auto dev = cuda::device(0);
  ASSERT_TRUE(dev.ok());
  const bool hopper = (*dev)->traits.cc_major == 9;
  for (const char* preset : presets) {
    auto config = moe::preset_config(preset, 16);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    const LayerData data = make_data(*config, kFusedTokens, seed);
    auto plain = moe::DeviceMoeLayer::create(*config, kFusedTokens);
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    DeviceLayerData d(data);
    ASSERT_TRUE(run_device_layer(*plain, d).is_ok());
    const LayerResult want = d.results(*plain);
    ASSERT_FALSE(want.y.empty());
    check(std::string(preset), *config, d, want, hopper);
  }
}

// DeviceMoeOptions::gather_in_up_gemm's default (Fusion::kAuto): on Hopper the layer reads x
// through the index for up projections of 257 to 4096 columns (here qwen3-30b-a3b's and
// deepseek-v3's at a quarter of their size, 384 and 1024) while x fits in 64 MiB, and gathers
// first for wider ones (mixtral-8x7b's 7168), for a larger x and for Llama-4's scaled rows; kOff
// and kOn override it. gather_in_down_data_grad's default gathers dy for ffn widths of 257 to
// 1024 while dy fits in 64 MiB (deepseek-v3's 512 at a quarter: yes; qwen3-30b-a3b's 192 and
// mixtral-8x7b's 3584: no).
TEST(DeviceMoeLayer, DefaultFusesTheGatherWhereItPays) {
  REQUIRE_GPU();
  auto dev = cuda::device(0);
  ASSERT_TRUE(dev.ok());
  if ((*dev)->traits.cc_major != 9) GTEST_SKIP() << "the gathering kernel is the Hopper family's";
  auto plans = [](const char* preset, moe::Fusion gather, std::int64_t tokens = 512,
                  moe::Fusion gather_dy = moe::Fusion::kAuto) {
    auto config = moe::preset_config(preset, 4);
    EXPECT_TRUE(config.ok()) << config.status().to_string();
    moe::DeviceMoeOptions options;
    options.gather_in_up_gemm = gather;
    options.gather_in_down_data_grad = gather_dy;
    auto layer = moe::DeviceMoeLayer::create(*config, tokens, options);
    EXPECT_TRUE(layer.ok()) << layer.status().to_string();
    return layer.ok() ? layer->describe() : std::string();
  };
  const auto up = [&](const char* preset, moe::Fusion gather, std::int64_t tokens = 512) {
    const std::string line = plan_line(plans(preset, gather, tokens), "routed up");
    EXPECT_FALSE(line.empty()) << preset;
    return line;
  };
  const auto d_act = [&](const char* preset, moe::Fusion gather_dy, std::int64_t tokens = 512) {
    const std::string line = plan_line(plans(preset, moe::Fusion::kAuto, tokens, gather_dy), "routed d_act");
    EXPECT_FALSE(line.empty()) << preset;
    return line;
  };
  for (const char* preset : {"qwen3-30b-a3b", "deepseek-v3"}) {
    EXPECT_NE(up(preset, moe::Fusion::kAuto).find("gatherA cluster2n"), std::string::npos) << preset;
    EXPECT_EQ(up(preset, moe::Fusion::kOff).find("gatherA"), std::string::npos) << preset;
  }
  // qwen3-30b-a3b's x at a quarter size: 1 KiB a token, so 64 MiB at 65536 tokens
  EXPECT_NE(up("qwen3-30b-a3b", moe::Fusion::kAuto, 65536).find("gatherA"), std::string::npos);
  EXPECT_EQ(up("qwen3-30b-a3b", moe::Fusion::kAuto, 65544).find("gatherA"), std::string::npos);
  EXPECT_EQ(up("mixtral-8x7b", moe::Fusion::kAuto).find("gatherA"), std::string::npos);
  EXPECT_NE(up("mixtral-8x7b", moe::Fusion::kOn).find("gatherA"), std::string::npos);
  EXPECT_EQ(up("llama4-scout", moe::Fusion::kAuto).find("gatherA"), std::string::npos);
  EXPECT_EQ(up("llama4-scout", moe::Fusion::kOn).find("gatherA"), std::string::npos);  // scaled rows

  // the up projection's weight gradient reads x through the index where the up projection does
  EXPECT_NE(plan_line(plans("qwen3-30b-a3b", moe::Fusion::kAuto), "routed d_w_up").find("gatherA"), std::string::npos);
  EXPECT_EQ(plan_line(plans("qwen3-30b-a3b", moe::Fusion::kOff), "routed d_w_up").find("gatherA"), std::string::npos);
  EXPECT_EQ(plan_line(plans("mixtral-8x7b", moe::Fusion::kAuto), "routed d_w_up").find("gatherA"), std::string::npos);
  // deepseek-v3 at a quarter (ffn 512) gathers; at full size (2048) the default does not
  EXPECT_NE(plan_line(plans("deepseek-v3", moe::Fusion::kAuto), "routed d_w_up").find("gatherA"), std::string::npos);

  EXPECT_EQ(d_act("qwen3-30b-a3b", moe::Fusion::kAuto).find("gatherA"), std::string::npos);
  EXPECT_NE(d_act("qwen3-30b-a3b", moe::Fusion::kOn).find("gatherA"), std::string::npos);
  EXPECT_NE(d_act("deepseek-v3", moe::Fusion::kAuto).find("gatherA"), std::string::npos);
  EXPECT_EQ(d_act("deepseek-v3", moe::Fusion::kOff).find("gatherA"), std::string::npos);
  // deepseek-v3's dy at a quarter size: 3584 bytes a token, past 64 MiB at 18725 tokens
  EXPECT_EQ(d_act("deepseek-v3", moe::Fusion::kAuto, 18725).find("gatherA"), std::string::npos);
  EXPECT_EQ(d_act("mixtral-8x7b", moe::Fusion::kAuto).find("gatherA"), std::string::npos);
  EXPECT_NE(d_act("mixtral-8x7b", moe::Fusion::kOn).find("gatherA"), std::string::npos);
  EXPECT_EQ(d_act("llama4-scout", moe::Fusion::kOn).find("gatherA"), std::string::npos);
}

// SwiGLU in the up projection's epilogue (DeviceMoeOptions::swiglu_in_up_gemm), alone and with
// the rows read through the token index, against the SwiGLU kernel after the plain up projection:
// the same products rounded the same way and the same silu expression, so the same bytes, forward
// and backward (which runs the up projection again for the product it needs). On Hopper every
// fused layer must really plan the epilogue.
TEST(DeviceMoeLayer, SwigluInTheUpProjectionGivesTheBytesOfTheSwigluKernel) {
  REQUIRE_GPU();
  against_the_default_layer({"qwen3-30b-a3b", "deepseek-v3"}, 79, [](const std::string& preset, const moe::MoeConfig& config,
                                                                     DeviceLayerData& d, const LayerResult& want,
                                                                     bool hopper) {
    for (bool gathering : {false, true}) {
      moe::DeviceMoeOptions options;
      options.swiglu_in_up_gemm = true;
      options.gather_in_up_gemm = gathering ? moe::Fusion::kOn : moe::Fusion::kOff;
      auto fused = moe::DeviceMoeLayer::create(config, kFusedTokens, options);
      ASSERT_TRUE(fused.ok()) << fused.status().to_string();
      const std::string what = preset + (gathering ? " with gathered rows" : "");
      if (hopper) EXPECT_NE(fused->describe().find("swiglu"), std::string::npos) << what << "\n" << fused->describe();
      ASSERT_TRUE(run_device_layer(*fused, d).is_ok()) << what;
      expect_same_bytes(d.results(*fused), want, what);
    }
  });
}

// The combine in the down projection (DeviceMoeOptions::combine_in_down_gemm), alone and with the
// SwiGLU in the up projection, against the combine kernel: y from the same rounded rows and
// weights, summed in f32 in another order, so equal up to the last bit of a few elements; the
// gradients the same bytes (backward runs the down projection again for the rows it reads). On
// Hopper every fused layer must really plan the scattering down projection.
TEST(DeviceMoeLayer, CombineInTheDownProjectionMatchesTheCombineKernel) {
  REQUIRE_GPU();
  against_the_default_layer({"qwen3-30b-a3b", "deepseek-v3", "llama4-scout"}, 83,
                            [](const std::string& preset, const moe::MoeConfig& config, DeviceLayerData& d,
                               const LayerResult& want, bool hopper) {
    for (bool swiglu : {false, true}) {
      moe::DeviceMoeOptions options;
      options.combine_in_down_gemm = true;
      options.swiglu_in_up_gemm = swiglu;
      auto fused = moe::DeviceMoeLayer::create(config, kFusedTokens, options);
      ASSERT_TRUE(fused.ok()) << fused.status().to_string();
      const std::string what = preset + (swiglu ? " with the SwiGLU fused too" : "");
      if (hopper) EXPECT_NE(fused->describe().find("scatter"), std::string::npos) << what << "\n" << fused->describe();
      ASSERT_TRUE(run_device_layer(*fused, d).is_ok()) << what;
      const LayerResult got = d.results(*fused);
      EXPECT_EQ(got.group_sizes, want.group_sizes) << what;
      ASSERT_EQ(got.y.size(), want.y.size());
      double err2 = 0, ref2 = 0;
      std::size_t differ = 0;
      for (std::size_t i = 0; i < want.y.size(); ++i) {
        err2 += double(got.y[i] - want.y[i]) * double(got.y[i] - want.y[i]);
        ref2 += double(want.y[i]) * double(want.y[i]);
        differ += got.y[i] != want.y[i];
      }
      EXPECT_LT(std::sqrt(err2 / std::max(ref2, 1e-30)), 2e-3) << what;
      EXPECT_LT(double(differ), 0.2 * double(want.y.size())) << what << ": " << differ << " elements differ";
      EXPECT_TRUE(got.d_x == want.d_x) << what;
      EXPECT_TRUE(got.d_router == want.d_router) << what;
      EXPECT_TRUE(got.d_w_up == want.d_w_up) << what;
      EXPECT_TRUE(got.d_w_down == want.d_w_down) << what;
    }
  });
}

TEST(DeviceMoeLayer, GraphCaptureReplaysWithNewInputs) {
  REQUIRE_GPU();
  auto config = moe::preset_config("deepseek-v3", 16);
  ASSERT_TRUE(config.ok());
  const std::int64_t tokens = 48;
  // the same parameters, new inputs: the captured graph reads the inputs' buffers again
  const LayerData first = make_data(*config, tokens, 101);
  LayerData second = first;
  const LayerData other = make_data(*config, tokens, 202);
  second.x = other.x;
  second.dy = other.dy;
  auto layer = moe::DeviceMoeLayer::create(*config, tokens);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  ASSERT_TRUE(layer->graph_safe()) << layer->describe();
  DeviceLayerData dev(first);

  const cuda::DriverApi* d = cuda::driver();
  auto device = cuda::device(0);
  ASSERT_TRUE(device.ok());
  cuda::ScopedContext scope((*device)->context);
  CUstream stream = static_cast<CUstream>(gpu()->stream());
  ASSERT_EQ(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  Status st = layer->forward(dev.x->p, dev.params(), dev.y->p, stream);
  if (st.is_ok()) st = layer->backward(dev.x->p, dev.params(), dev.dy->p, dev.grads(), stream);
  CUgraph graph = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  CUgraphExec exec = nullptr;
  ASSERT_EQ(d->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);

  for (const LayerData* data : std::initializer_list<const LayerData*>{&second, &first, &second}) {
    std::string error;
    const LayerResult want = run_host_layer(*data, &error);
    ASSERT_TRUE(error.empty()) << error;
    // new inputs in the captured buffers: new routing and group sizes
    upload(*dev.x, from_f32(data->x, DType::kBF16));
    upload(*dev.dy, from_f32(data->dy, DType::kBF16));
    dev.poison_outputs();
    ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    ASSERT_TRUE(gpu()->synchronize().is_ok());
    const LayerResult replayed = dev.results(*layer);
    expect_close(replayed, want, 1e-2, data == &first ? "replay, first inputs" : "replay, second inputs");
    // the same inputs run eagerly give the same results
    ASSERT_TRUE(run_device_layer(*layer, dev).is_ok());
    expect_close(replayed, dev.results(*layer), 1e-3, "replay vs eager");
  }
  d->cuGraphExecDestroy(exec);
  d->cuGraphDestroy(graph);
}

TEST(DeviceMoeLayer, PaddedBaselinesMatchAndCountDroppedPairs) {
  REQUIRE_GPU();
  auto config = moe::preset_config("qwen3-30b-a3b", 16);
  ASSERT_TRUE(config.ok());
  const std::int64_t tokens = 80, pairs = tokens * config->top_k;
  const LayerData data = make_data(*config, tokens, 7);
  DeviceLayerData dev(data);
  auto layer = moe::DeviceMoeLayer::create(*config, tokens);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  ASSERT_TRUE(run_device_layer(*layer, dev).is_ok());
  const LayerResult ours = dev.results(*layer);
  std::int64_t largest = 0;
  for (auto g : ours.group_sizes) largest = std::max(largest, g);

  moe::DeviceMoeOptions dropless;
  dropless.expert_backend = "padded";
  dropless.max_group_rows = largest;
  moe::DeviceMoeOptions dropping = dropless;
  dropping.max_group_rows.reset();
  dropping.capacity_factor = 1.0;
  for (const auto& [name, o] : {std::pair{"dropless", dropless}, std::pair{"capacity factor 1.0", dropping}}) {
    auto padded = moe::DeviceMoeLayer::create(*config, tokens, o);
    ASSERT_TRUE(padded.ok()) << name << ": " << padded.status().to_string();
    Status st = run_device_layer(*padded, dev);
    ASSERT_TRUE(st.is_ok()) << name << ": " << st.to_string();
    auto stats = padded->routing_stats(gpu()->stream());
    ASSERT_TRUE(stats.ok()) << stats.status().to_string();
    EXPECT_EQ(stats->group_sizes, ours.group_sizes) << name;
    if (!o.capacity_factor) {
      EXPECT_EQ(stats->dropped_pairs, 0) << name;
      expect_close(dev.results(*padded), ours, 1e-2, name);
      continue;
    }
    const std::int64_t cap = (pairs + config->experts - 1) / config->experts;
    std::int64_t dropped = 0;
    for (auto g : ours.group_sizes) dropped += std::max<std::int64_t>(g - cap, 0);
    EXPECT_EQ(stats->capacity, cap);
    EXPECT_EQ(stats->dropped_pairs, dropped) << name;
    EXPECT_GT(dropped, 0) << "a seeded router over 128 experts overflows some at capacity 1.0";
    // the host layer on the host padded baseline drops the same pairs (the first `cap` rows of
    // each expert's group are kept)
    PlanOptions host_dropping;
    host_dropping.backend = "padded";
    host_dropping.memory_space = MemorySpace::kHost;
    host_dropping.padded_capacity_factor = 1.0;
    std::string error;
    const LayerResult want = run_host_layer(data, &error, host_dropping);
    ASSERT_TRUE(error.empty()) << error;
    expect_close(dev.results(*padded), want, 1e-2, name);
  }
}

TEST(DeviceMoeLayer, RejectsBadArguments) {
  REQUIRE_GPU();
  auto config = moe::preset_config("mixtral-8x7b", 64);
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(moe::DeviceMoeLayer::create(*config, 0).ok());
  moe::DeviceMoeOptions o;
  o.capacity_factor = 1.25;  // only with the padded expert backend
  EXPECT_FALSE(moe::DeviceMoeLayer::create(*config, 16, o).ok());
  o = {};
  o.expert_backend = "cpu";  // a host backend cannot take device buffers
  EXPECT_FALSE(moe::DeviceMoeLayer::create(*config, 16, o).ok());
  moe::MoeConfig wide = *config;
  wide.experts = 2048;
  EXPECT_FALSE(moe::DeviceMoeLayer::create(wide, 16).ok());
  moe::MoeConfig geglu = *config;
  geglu.activation = moe::GatedActivation::kGeGLU;
  o = {};
  o.swiglu_in_up_gemm = true;  // fuses SwiGLU only
  EXPECT_FALSE(moe::DeviceMoeLayer::create(geglu, 16, o).ok());
  geglu.activation = static_cast<moe::GatedActivation>(5);
  EXPECT_FALSE(moe::DeviceMoeLayer::create(geglu, 16).ok());
  auto layer = moe::DeviceMoeLayer::create(*config, 16);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  DeviceBuffer x(16 * std::size_t(config->hidden) * 2), y(16 * std::size_t(config->hidden) * 2);
  const moe::DeviceMoeParams none;
  EXPECT_FALSE(layer->forward(x.p, none, y.p, gpu()->stream()).is_ok());
  EXPECT_FALSE(layer->backward(x.p, none, y.p, {}, gpu()->stream()).is_ok()) << "backward before forward";
  EXPECT_FALSE(layer->routing_stats(gpu()->stream()).ok()) << "no forward yet";
}

}  // namespace
}  // namespace ragdot
