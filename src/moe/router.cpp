#include "moe/router.hpp"

#include <algorithm>
#include <cmath>

namespace ragdot::moe {

namespace {

using workloads::RouterKind;

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The k largest of score[0..e), larger first, ties to the lower index.
void top_k(const double* score, std::int64_t e, std::int64_t k, std::int32_t* out) {
  for (std::int64_t j = 0; j < k; ++j) out[j] = -1;
  for (std::int64_t i = 0; i < e; ++i) {
    std::int64_t j = k;
    while (j > 0 && (out[j - 1] < 0 || score[i] > score[out[j - 1]])) --j;
    if (j == k) continue;
    for (std::int64_t m = k - 1; m > j; --m) out[m] = out[m - 1];
    out[j] = std::int32_t(i);
  }
}

}  // namespace

void route_token(RouterKind kind, const float* logits, const float* bias, std::int64_t experts, std::int64_t k,
                 double scaling, RouteChoice out, double* scratch) {
  double* score = scratch;
  *out.input_scale = 1.0f;
  switch (kind) {
    // Mixtral: top-k of the logits, softmax over those k. Qwen3: softmax over all, top-k,
    // renormalized, which is the same softmax over the top-k logits.
    case RouterKind::kSoftmaxTopK:
    case RouterKind::kSoftmaxTopKRenormalized: {
      for (std::int64_t i = 0; i < experts; ++i) score[i] = logits[i];
      top_k(score, experts, k, out.experts);
      const double top = score[out.experts[0]];
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += std::exp(score[out.experts[j]] - top);
      for (std::int64_t j = 0; j < k; ++j) out.weights[j] = float(scaling * std::exp(score[out.experts[j]] - top) / sum);
      return;
    }
    case RouterKind::kDeepSeekV3: {
      for (std::int64_t i = 0; i < experts; ++i) score[i] = sigmoid(logits[i]) + (bias ? bias[i] : 0.0f);
      top_k(score, experts, k, out.experts);
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += sigmoid(logits[out.experts[j]]);
      for (std::int64_t j = 0; j < k; ++j) out.weights[j] = float(scaling * sigmoid(logits[out.experts[j]]) / sum);
      return;
    }
    case RouterKind::kLlama4: {  // top-k (1 in the preset); the sigmoid scales the input
      for (std::int64_t i = 0; i < experts; ++i) score[i] = logits[i];
      top_k(score, experts, k, out.experts);
      for (std::int64_t j = 0; j < k; ++j) out.weights[j] = float(scaling);
      *out.input_scale = float(sigmoid(score[out.experts[0]]));
      return;
    }
  }
}

void route_token_backward(RouterKind kind, const float* logits, std::int64_t experts, std::int64_t k, double scaling,
                          const std::int32_t* chosen, const float* d_weights, float d_input_scale, float* d_logits,
                          double* scratch) {
  std::fill(d_logits, d_logits + experts, 0.0f);
  switch (kind) {
    case RouterKind::kSoftmaxTopK:
    case RouterKind::kSoftmaxTopKRenormalized: {
      // w_j = c * softmax over the chosen logits: dz_j = w_j (dw_j - sum_i w_i dw_i) / ... (c folded in)
      double* p = scratch;
      const double top = logits[chosen[0]];
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += (p[j] = std::exp(double(logits[chosen[j]]) - top));
      double dot = 0;
      for (std::int64_t j = 0; j < k; ++j) dot += (p[j] /= sum) * d_weights[j];
      for (std::int64_t j = 0; j < k; ++j) d_logits[chosen[j]] = float(scaling * p[j] * (d_weights[j] - dot));
      return;
    }
    case RouterKind::kDeepSeekV3: {
      // w_j = c s_j / S, S = sum of the chosen s: ds_j = c (dw_j - sum_i dw_i s_i / S) / S; ds/dz = s (1 - s)
      double* s = scratch;
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += (s[j] = sigmoid(logits[chosen[j]]));
      double dot = 0;
      for (std::int64_t j = 0; j < k; ++j) dot += d_weights[j] * s[j] / sum;
      for (std::int64_t j = 0; j < k; ++j)
        d_logits[chosen[j]] = float(scaling * (d_weights[j] - dot) / sum * s[j] * (1.0 - s[j]));
      return;
    }
    case RouterKind::kLlama4: {  // constant weights; the input scale is sigmoid(z_top)
      const double s = sigmoid(logits[chosen[0]]);
      d_logits[chosen[0]] = float(double(d_input_scale) * s * (1.0 - s));
      return;
    }
  }
}

}  // namespace ragdot::moe
