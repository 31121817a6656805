// The MoE layer against a per-token float64 oracle written here (its own routing, FFN and combine),
// for every preset at small sizes and both CPU backends; gradients against central differences
// of that oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "moe/gated_activation.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/moe_device.hpp"

namespace ragdot::moe {
namespace {

using workloads::RouterKind;

struct Params {
  std::vector<float> router, bias, w_up, w_down, s_up, s_down;
  MoeParams view() const {
    return {router.data(), bias.empty() ? nullptr : bias.data(), w_up.data(), w_down.data(),
            s_up.empty() ? nullptr : s_up.data(), s_down.empty() ? nullptr : s_down.data()};
  }
};

std::vector<float> random_vector(std::size_t n, double scale, workloads::SplitMix64& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(scale * rng.normal());
  return v;
}

Params random_params(const MoeConfig& c, workloads::SplitMix64& rng) {
  const std::size_t h = std::size_t(c.hidden), f = std::size_t(c.ffn), e = std::size_t(c.experts),
                    s = std::size_t(c.shared_experts);
  Params p;
  p.router = random_vector(h * e, 1.0 / std::sqrt(double(h)), rng);
  if (c.router == RouterKind::kDeepSeekV3) p.bias = random_vector(e, 0.1, rng);
  p.w_up = random_vector(e * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  p.w_down = random_vector(e * f * h, 1.0 / std::sqrt(double(f)), rng);
  p.s_up = random_vector(s * h * 2 * f, 1.0 / std::sqrt(double(h)), rng);
  p.s_down = random_vector(s * f * h, 1.0 / std::sqrt(double(f)), rng);
  return p;
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The gate's activation of each GatedActivation, from its definition.
double gate_activation(GatedActivation a, double g) {
  switch (a) {
    case GatedActivation::kSwiGLU: return g * sigmoid(g);
    case GatedActivation::kGeGLU: return 0.5 * g * std::erfc(-g / std::sqrt(2.0));
    case GatedActivation::kGeGLUTanh:
      return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
  }
  return std::nan("");
}

// y [T, H] in float64, straight from the definitions of each router.
std::vector<double> oracle(const MoeConfig& c, std::int64_t tokens, const std::vector<double>& x, const Params& p,
                           const std::vector<double>& router, const std::vector<double>& w_up,
                           const std::vector<double>& w_down, const std::vector<double>& s_up,
                           const std::vector<double>& s_down) {
  const std::int64_t h = c.hidden, f = c.ffn, e = c.experts, k = c.top_k;
  std::vector<double> y(std::size_t(tokens * h), 0.0);
  auto ffn = [&](const double* in, const double* up_w, const double* down_w, double weight, double* out) {
    std::vector<double> act(static_cast<std::size_t>(f));
    for (std::int64_t j = 0; j < f; ++j) {
      double g = 0, u = 0;
      for (std::int64_t i = 0; i < h; ++i) {
        g += in[i] * up_w[i * 2 * f + j];
        u += in[i] * up_w[i * 2 * f + f + j];
      }
      act[j] = gate_activation(c.activation, g) * u;
    }
    for (std::int64_t i = 0; i < h; ++i) {
      double acc = 0;
      for (std::int64_t j = 0; j < f; ++j) acc += act[j] * down_w[j * h + i];
      out[i] += weight * acc;
    }
  };
  for (std::int64_t t = 0; t < tokens; ++t) {
    const double* xt = x.data() + t * h;
    std::vector<double> z(static_cast<std::size_t>(e), 0.0), sel(static_cast<std::size_t>(e));
    for (std::int64_t j = 0; j < e; ++j) {
      for (std::int64_t i = 0; i < h; ++i) z[j] += xt[i] * router[i * e + j];
      sel[j] = c.router == RouterKind::kDeepSeekV3 ? sigmoid(z[j]) + (p.bias.empty() ? 0.0 : p.bias[j]) : z[j];
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return sel[a] > sel[b]; });
    std::vector<double> w(static_cast<std::size_t>(k));
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const double z_j = z[order[j]];
      w[j] = c.router == RouterKind::kDeepSeekV3 ? sigmoid(z_j) : c.router == RouterKind::kLlama4 ? 1.0 : std::exp(z_j);
      sum += w[j];
    }
    std::vector<double> in(xt, xt + h);
    if (c.router == RouterKind::kLlama4) {
      for (auto& v : in) v *= sigmoid(z[order[0]]);
      sum = 1.0;
    }
    double* yt = y.data() + t * h;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t ex = order[j];
      ffn(in.data(), w_up.data() + ex * h * 2 * f, w_down.data() + ex * f * h, c.routed_scaling * w[j] / sum, yt);
    }
    for (std::int64_t j = 0; j < c.shared_experts; ++j)
      ffn(xt, s_up.data() + j * h * 2 * f, s_down.data() + j * f * h, 1.0, yt);
  }
  return y;
}

std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Case {
  const char* preset;
  std::int64_t shrink, tokens;
  GatedActivation activation = GatedActivation::kSwiGLU;
};
const Case kCases[] = {{"mixtral-8x7b", 256, 24},
                       {"deepseek-v3", 256, 40},
                       {"llama4-scout", 256, 20},
                       {"qwen3-30b-a3b", 256, 33},
                       {"qwen3-30b-a3b", 256, 29, GatedActivation::kGeGLU},
                       {"deepseek-v3", 256, 21, GatedActivation::kGeGLUTanh}};

class MoeLayerTest : public ::testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(MoeLayerTest, ForwardAndBackwardMatchTheOracle) {
  const auto [cs, backend] = GetParam();
  auto config = preset_config(cs.preset, cs.shrink);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  MoeConfig c = *config;
  c.activation = cs.activation;
  const std::int64_t t = cs.tokens, h = c.hidden;
  workloads::SplitMix64 rng(std::hash<std::string>{}(cs.preset));
  const Params p = random_params(c, rng);
  const std::vector<float> x = random_vector(std::size_t(t * h), 1.0, rng);
  const std::vector<float> r = random_vector(std::size_t(t * h), 1.0, rng);  // loss = sum(y * r)

  PlanOptions po;
  po.backend = backend;
  auto layer = MoeLayer::create(c, t, po);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  std::vector<float> y(std::size_t(t * h), std::nanf(""));
  const Status fwd = layer->forward(x.data(), p.view(), y.data());
  ASSERT_TRUE(fwd.is_ok()) << fwd.to_string();

  const auto ref = oracle(c, t, wide(x), p, wide(p.router), wide(p.w_up), wide(p.w_down), wide(p.s_up), wide(p.s_down));
  double scale = 0;
  for (double v : ref) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4 * scale + 1e-5) << "y[" << i << "]";
  const auto& gs = layer->routing().group_sizes;
  EXPECT_EQ(std::accumulate(gs.begin(), gs.end(), std::int64_t(0)), t * c.top_k);

  // analytic gradients, outputs poisoned first
  const std::size_t e = std::size_t(c.experts), f = std::size_t(c.ffn), s = std::size_t(c.shared_experts);
  std::vector<float> dx(x.size(), std::nanf("")), dr(p.router.size(), std::nanf("")), dup(p.w_up.size(), std::nanf("")),
      ddown(p.w_down.size(), std::nanf("")), dsup(s * h * 2 * f, std::nanf("")), dsdown(s * f * h, std::nanf(""));
  MoeGrads g{dx.data(), dr.data(), dup.data(), ddown.data(), dsup.empty() ? nullptr : dsup.data(),
             dsdown.empty() ? nullptr : dsdown.data()};
  const Status bwd = layer->backward(x.data(), p.view(), r.data(), g);
  ASSERT_TRUE(bwd.is_ok()) << bwd.to_string();

  // central differences of the oracle at a few coordinates of every input
  struct Input {
    const char* name;
    const std::vector<float>* value;
    const std::vector<float>* grad;
    int which;  // 0 x, 1 router, 2 w_up, 3 w_down, 4 shared up, 5 shared down
  };
  const Input inputs[] = {{"x", &x, &dx, 0},       {"router", &p.router, &dr, 1}, {"w_up", &p.w_up, &dup, 2},
                          {"w_down", &p.w_down, &ddown, 3}, {"shared_up", &p.s_up, &dsup, 4},
                          {"shared_down", &p.s_down, &dsdown, 5}};
  for (const Input& in : inputs) {
    if (in.value->empty()) continue;
    for (int probe = 0; probe < 8; ++probe) {
      const std::size_t i = std::size_t(rng.next() % in.value->size());
      std::vector<std::vector<double>> v = {wide(x), wide(p.router), wide(p.w_up), wide(p.w_down), wide(p.s_up),
                                            wide(p.s_down)};
      const double eps = 1e-5 * std::max(1.0, std::abs(double((*in.value)[i])));
      auto loss_at = [&](double delta) {
        auto w = v;
        w[std::size_t(in.which)][i] += delta;
        const auto yy = oracle(c, t, w[0], p, w[1], w[2], w[3], w[4], w[5]);
        double l = 0;
        for (std::size_t j = 0; j < yy.size(); ++j) l += yy[j] * r[j];
        return l;
      };
      const double fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
      const double got = (*in.grad)[i];
      EXPECT_NEAR(got, fd, 2e-3 * std::abs(fd) + 2e-4 * std::sqrt(double(t * h)))
          << cs.preset << " " << backend << " d" << in.name << "[" << i << "]";
    }
    for (float v : *in.grad) ASSERT_TRUE(std::isfinite(v)) << in.name << ": a gradient entry was not written";
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeLayerTest,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values("cpu", "cpu_ref")),
                         [](const auto& info) {
                           const Case& cs = std::get<0>(info.param);
                           std::string n = std::string(cs.preset) + "_" + activation_name(cs.activation) + "_" +
                                           std::get<1>(info.param);
                           for (auto& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

TEST(MoeLayer, BadConfigAndCallsAreClearErrors) {
  MoeConfig c;
  c.hidden = 8, c.ffn = 4, c.experts = 4, c.top_k = 5;
  auto bad = MoeLayer::create(c, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("top_k"), std::string::npos);
  c.top_k = 2;
  c.router = RouterKind::kLlama4;
  EXPECT_FALSE(MoeLayer::create(c, 10).ok());
  c.router = RouterKind::kSoftmaxTopK;
  EXPECT_FALSE(MoeLayer::create(c, 0).ok());
  EXPECT_FALSE(preset_config("no-such-model").ok());
  EXPECT_FALSE(preset_config("mixtral-8x7b", 3).ok());  // 4096 / 3 is not whole
  c.activation = static_cast<GatedActivation>(3);
  bad = MoeLayer::create(c, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("activation"), std::string::npos);
  c.activation = GatedActivation::kGeGLU;
  c.router = static_cast<RouterKind>(9);
  bad = MoeLayer::create(c, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("router"), std::string::npos);
  c.router = RouterKind::kSoftmaxTopK;
  // sizes whose buffers cannot exist: a clear error, never a wrapped size or an exception
  c.shared_experts = (std::int64_t(1) << 62) + 1;  // shared x tokens x 2 x ffn would wrap in 64 bits
  bad = MoeLayer::create(c, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("too many elements"), std::string::npos) << bad.status().message();
  c.shared_experts = 0;
  c.experts = std::int64_t(1) << 31;  // past int32 expert indices
  EXPECT_EQ(MoeLayer::create(c, 10).status().code(), StatusCode::kInvalidArgument);
  c.experts = 4;
  EXPECT_EQ(MoeLayer::create(c, std::int64_t(1) << 40).status().code(), StatusCode::kInvalidArgument);

  auto layer = MoeLayer::create(c, 10);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  std::vector<float> x(80, 1.0f), y(80), dy(80, 1.0f), dx(80);
  MoeGrads g{dx.data()};
  EXPECT_FALSE(layer->backward(x.data(), {}, dy.data(), g).is_ok());  // before any forward
  EXPECT_FALSE(layer->forward(x.data(), {}, y.data()).is_ok());       // no parameters
  workloads::SplitMix64 rng(3);
  const Params p = random_params(c, rng);
  EXPECT_FALSE(layer->forward(nullptr, p.view(), y.data()).is_ok());
  EXPECT_TRUE(layer->forward(x.data(), p.view(), y.data()).is_ok());
  EXPECT_FALSE(layer->backward(x.data(), p.view(), dy.data(), MoeGrads{}).is_ok());  // no d_x
}

// The host activations and their gradients, element by element, against the definitions above
// (values) and their central differences in float64 (slopes): tighter than the layer test, whose
// tolerance would not tell gelu's exact slope from its tanh approximation's (they differ by ~1e-3).
TEST(MoeLayer, GatedActivationsMatchTheirDefinitionsAndSlopes) {
  const std::int64_t ffn = 241;
  std::vector<float> up(2 * ffn), d_act(ffn), act(ffn), d_up(2 * ffn);
  for (std::int64_t c = 0; c < ffn; ++c) {
    up[c] = -6.0f + 12.0f * float(c) / float(ffn - 1);  // gate from -6 to 6
    up[ffn + c] = 0.5f + 0.01f * float(c);              // up
    d_act[c] = 1.0f - 0.003f * float(c);
  }
  for (GatedActivation a : {GatedActivation::kSwiGLU, GatedActivation::kGeGLU, GatedActivation::kGeGLUTanh}) {
    std::fill(act.begin(), act.end(), std::nanf(""));
    std::fill(d_up.begin(), d_up.end(), std::nanf(""));
    gated_activation(a, up.data(), 1, ffn, act.data());
    gated_activation_backward(a, up.data(), d_act.data(), 1, ffn, d_up.data());
    for (std::int64_t c = 0; c < ffn; ++c) {
      const double g = up[c], u = up[ffn + c], da = d_act[c], eps = 1e-6;
      const double value = gate_activation(a, g);
      const double slope = (gate_activation(a, g + eps) - gate_activation(a, g - eps)) / (2 * eps);
      EXPECT_NEAR(act[c], value * u, 2e-6 * (1 + std::abs(value * u))) << activation_name(a) << " gate " << g;
      EXPECT_NEAR(d_up[c], da * u * slope, 2e-6 * (1 + std::abs(da * u * slope))) << activation_name(a) << " gate " << g;
      EXPECT_NEAR(d_up[ffn + c], da * value, 2e-6 * (1 + std::abs(da * value))) << activation_name(a) << " gate " << g;
    }
  }
}

TEST(MoeLayer, ActivationNamesRoundTrip) {
  for (GatedActivation a : {GatedActivation::kSwiGLU, GatedActivation::kGeGLU, GatedActivation::kGeGLUTanh}) {
    auto parsed = parse_activation(activation_name(a));
    ASSERT_TRUE(parsed.ok()) << activation_name(a);
    EXPECT_EQ(*parsed, a);
  }
  auto bad = parse_activation("relu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("geglu_tanh"), std::string::npos);  // names the known ones
}

// The values the device fill writes (and bench/moe_layer_peers.py reproduces with NumPy, so that
// the peers route like ragdot): pinned, so that a change to the hash shows here.
TEST(MoeLayer, UniformFillValuesArePinned) {
  EXPECT_EQ(uniform_fill_value(17, 0, 0.011048543f), 0.0102251442f);
  EXPECT_EQ(uniform_fill_value(17, 12345, 0.011048543f), -0.00688234717f);
  EXPECT_EQ(uniform_fill_value(17, (std::uint64_t(1) << 32) + 5, 0.011048543f), 0.00224104803f);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const float v = uniform_fill_value(3, i, 2.0f);
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 2.0f);
  }
}

// Where there is no GPU (or no CUDA in the build), the device layer's entry points are clean
// errors, never a crash; bad arguments are refused before any device is touched.
TEST(MoeLayer, DeviceLayerFailsCleanlyWithoutAGpu) {
  auto config = preset_config("qwen3-30b-a3b", 64);
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(DeviceMoeLayer::create(*config, 0).ok()) << "no tokens";
  DeviceMoeOptions o;
  o.capacity_factor = 1.0;  // needs the padded expert backend
  EXPECT_FALSE(DeviceMoeLayer::create(*config, 16, o).ok());
  auto layer = DeviceMoeLayer::create(*config, 16);
  if (!layer.ok()) EXPECT_FALSE(layer.status().message().empty());
  EXPECT_FALSE(fill_device_uniform(0, nullptr, DType::kBF16, 16, 1, 1.0f, nullptr).is_ok());
  EXPECT_FALSE(fill_device_uniform(0, nullptr, DType::kF16, 16, 1, 1.0f, nullptr).is_ok());
}

}  // namespace
}  // namespace ragdot::moe
