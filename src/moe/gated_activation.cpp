#include "moe/gated_activation.hpp"

#include <cmath>
#include <string>

namespace ragdot::moe {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
// gelu's tanh approximation: 0.5 g (1 + tanh(z)), z = kTanhScale (g + kTanhCubic g^3)
constexpr float kTanhScale = 0.79788456080286536f, kTanhCubic = 0.044715f;

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// a(g), and a(g) with a'(g) from one evaluation (backward needs both)
struct Silu {
  static float value(float g) { return g * sigmoid(g); }
  static void value_and_slope(float g, float& value, float& slope) {
    const float s = sigmoid(g);
    value = g * s;
    slope = s * (1.0f + g * (1.0f - s));
  }
};
struct Gelu {  // g Phi(g); slope Phi(g) + g phi(g)
  static float cdf(float g) { return 0.5f * (1.0f + std::erf(g * kInvSqrt2)); }
  static float value(float g) { return g * cdf(g); }
  static void value_and_slope(float g, float& value, float& slope) {
    const float phi = cdf(g);
    value = g * phi;
    slope = phi + g * kInvSqrt2Pi * std::exp(-0.5f * g * g);
  }
};
// as g s with s = 0.5 (1 + tanh z) = sigmoid(2 z), as the device kernel computes it (no
// cancellation where the gate is very negative); slope s + 2 g s (1 - s) dz/dg
struct GeluTanh {
  static float half_one_plus_tanh(float g) { return sigmoid(2.0f * kTanhScale * (g + kTanhCubic * g * g * g)); }
  static float value(float g) { return g * half_one_plus_tanh(g); }
  static void value_and_slope(float g, float& value, float& slope) {
    const float s = half_one_plus_tanh(g);
    value = g * s;
    slope = s + 2.0f * g * s * (1.0f - s) * kTanhScale * (1.0f + 3.0f * kTanhCubic * g * g);
  }
};

template <class A>
void forward_rows(const float* up, std::int64_t rows, std::int64_t ffn, float* act) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = up + r * 2 * ffn;
    const float* u = g + ffn;
    float* a = act + r * ffn;
    for (std::int64_t c = 0; c < ffn; ++c) a[c] = A::value(g[c]) * u[c];
  }
}

template <class A>
void backward_rows(const float* up, const float* d_act, std::int64_t rows, std::int64_t ffn, float* d_up) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = up + r * 2 * ffn;
    const float* u = g + ffn;
    const float* da = d_act + r * ffn;
    float* dg = d_up + r * 2 * ffn;
    float* du = dg + ffn;
    for (std::int64_t c = 0; c < ffn; ++c) {
      float value, slope;
      A::value_and_slope(g[c], value, slope);
      dg[c] = da[c] * u[c] * slope;
      du[c] = da[c] * value;
    }
  }
}

}  // namespace

const char* activation_name(GatedActivation a) {
  switch (a) {
    case GatedActivation::kSwiGLU: return "swiglu";
    case GatedActivation::kGeGLU: return "geglu";
    case GatedActivation::kGeGLUTanh: return "geglu_tanh";
  }
  return "unknown";
}

Result<GatedActivation> parse_activation(std::string_view name) {
  for (GatedActivation a : kGatedActivations)
    if (name == activation_name(a)) return a;
  return invalid_argument("unknown gated activation '" + std::string(name) + "' (known: swiglu, geglu, geglu_tanh)");
}

Status check_activation(const char* what, GatedActivation a) {
  for (GatedActivation known : kGatedActivations)
    if (a == known) return Status::ok();
  return invalid_argument(std::string(what) + ": unknown gated activation " + std::to_string(static_cast<int>(a)) +
                          " (known: swiglu, geglu, geglu_tanh)");
}

void gated_activation(GatedActivation a, const float* up, std::int64_t rows, std::int64_t ffn, float* act) {
  switch (a) {
    case GatedActivation::kSwiGLU: return forward_rows<Silu>(up, rows, ffn, act);
    case GatedActivation::kGeGLU: return forward_rows<Gelu>(up, rows, ffn, act);
    case GatedActivation::kGeGLUTanh: return forward_rows<GeluTanh>(up, rows, ffn, act);
  }
}

void gated_activation_backward(GatedActivation a, const float* up, const float* d_act, std::int64_t rows,
                               std::int64_t ffn, float* d_up) {
  switch (a) {
    case GatedActivation::kSwiGLU: return backward_rows<Silu>(up, d_act, rows, ffn, d_up);
    case GatedActivation::kGeGLU: return backward_rows<Gelu>(up, d_act, rows, ffn, d_up);
    case GatedActivation::kGeGLUTanh: return backward_rows<GeluTanh>(up, d_act, rows, ffn, d_up);
  }
}

}  // namespace ragdot::moe
