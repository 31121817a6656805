// MoeLayer: router -> stable sort of the (token, slot) pairs by expert -> gather -> expert FFN
// (ExpertFfn, ragged dots) -> weighted combine, plus the shared experts on every token.
// Backward runs the same steps in reverse; the router's gradient comes from the gradients of the
// combine weights (and of Llama-4's input scale).
#include "ragdot/moe.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include "core/element_limit.hpp"
#include "moe/expert_ffn.hpp"
#include "moe/gated_activation.hpp"
#include "moe/layer_config.hpp"
#include "moe/permutation.hpp"
#include "moe/router.hpp"

namespace ragdot::moe {

using workloads::RouterKind;

Result<MoeConfig> preset_config(std::string_view preset, std::int64_t shrink) {
  RAGDOT_ASSIGN_OR_RETURN(workloads::MoePreset p, workloads::find_preset(preset));
  if (shrink < 1 || p.hidden % shrink != 0 || p.expert_ffn % shrink != 0)
    return invalid_argument("shrink must be >= 1 and divide hidden " + std::to_string(p.hidden) + " and ffn " +
                            std::to_string(p.expert_ffn) + " (got " + std::to_string(shrink) + ")");
  MoeConfig c;
  c.hidden = p.hidden / shrink;
  c.ffn = p.expert_ffn / shrink;
  c.experts = p.experts;
  c.top_k = p.top_k;
  c.shared_experts = p.shared_experts;
  c.router = p.router;
  c.routed_scaling = p.router == RouterKind::kDeepSeekV3 ? 2.5 : 1.0;
  return c;
}

struct MoeLayer::State {
  MoeConfig c;
  std::int64_t tokens = 0;
  HostWorkspace ws;  // shared by every plan below; they run one at a time
  ExpertFfn routed, shared;
  std::vector<Plan> router;  // logits = x Wr, d_x += d_logits Wr^T, d_Wr = x^T d_logits
  bool has_shared = false;
  MoeRouting routing;
  Permutation perm;
  std::vector<std::int64_t> shared_gs;
  // activations of the last forward
  std::vector<float> logits, rows, up, act, out;        // routed: [T,E], [M,H], [M,2F], [M,F], [M,H]
  std::vector<float> s_up, s_act, s_out;                // per shared expert: [T,2F], [T,F], [T,H]
  bool forwarded = false;
  std::vector<double> route_scratch;  // [E]
  // backward scratch, sized at create so that forward and backward allocate nothing
  std::vector<float> d_rows_out, d_act, d_up, d_rows_in, d_logits, d_weights, d_scale, d_x_router;
  std::vector<float> s_d_act, s_d_up, s_d_in;  // one shared expert's: [T,F], [T,2F], [T,H]

  State(HostWorkspace w, ExpertFfn r, ExpertFfn s, std::vector<Plan> rp)
      : ws(std::move(w)), routed(std::move(r)), shared(std::move(s)), router(std::move(rp)) {}
};

MoeLayer::MoeLayer(std::unique_ptr<State> s) : s_(std::move(s)) {}
MoeLayer::MoeLayer(MoeLayer&&) noexcept = default;
MoeLayer& MoeLayer::operator=(MoeLayer&&) noexcept = default;
MoeLayer::~MoeLayer() = default;

Status check_layer_config(const MoeConfig& c, std::int64_t tokens) {
  if (c.hidden < 1 || c.ffn < 1 || c.experts < 1 || c.top_k < 1 || c.top_k > c.experts || c.shared_experts < 0)
    return invalid_argument("MoE config: hidden, ffn, experts >= 1, 1 <= top_k <= experts, shared_experts >= 0");
  RAGDOT_RETURN_IF_ERROR(check_activation("MoE config", c.activation));
  if (std::uint8_t(c.router) > std::uint8_t(RouterKind::kLlama4))
    return invalid_argument("MoE config: router kind " + std::to_string(int(c.router)) + " is not one of the four");
  if (c.router == RouterKind::kLlama4 && c.top_k != 1)
    return invalid_argument("the Llama-4 router scales the input by its top-1 score: top_k must be 1");
  if (tokens < 1) return invalid_argument("MoE layer: tokens must be >= 1 (got " + std::to_string(tokens) + ")");
  // Expert indices and row tables are int32; every buffer's element count must stay within the
  // limit any tensor has, so that no size computed from these overflows.
  if (c.experts > std::numeric_limits<std::int32_t>::max() || tokens > std::numeric_limits<std::int32_t>::max())
    return invalid_argument("MoE layer: experts and tokens must be below 2^31");
  using core::elements_fit;
  const std::int64_t t = tokens, k = c.top_k, h = c.hidden, f = c.ffn, e = c.experts, shared = c.shared_experts;
  if (!elements_fit({t, k, h}) || !elements_fit({t, k, 2, f}) || !elements_fit({t, e}) || !elements_fit({e, h, 2, f}) ||
      !elements_fit({shared, t, 2, f}) || !elements_fit({shared, h, 2, f})) {
    return invalid_argument("MoE layer: " + std::to_string(t) + " tokens, top " + std::to_string(k) + " of " +
                            std::to_string(e) + " experts (and " + std::to_string(shared) +
                            " shared), hidden " + std::to_string(h) + ", ffn " + std::to_string(f) +
                            " make buffers of too many elements");
  }
  return Status::ok();
}

Result<MoeLayer> MoeLayer::create(const MoeConfig& c, std::int64_t tokens, const PlanOptions& options) {
  RAGDOT_RETURN_IF_ERROR(check_layer_config(c, tokens));
  // the layer's buffers are allocated here: a size the host cannot give is an error, not an exception
  try {
    return create_checked(c, tokens, options);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("MoE layer: out of host memory for its buffers (" + std::to_string(tokens) + " tokens)");
  } catch (const std::length_error&) {
    return resource_exhausted("MoE layer: buffers too large for this host (" + std::to_string(tokens) + " tokens)");
  }
}

Result<MoeLayer> MoeLayer::create_checked(const MoeConfig& c, std::int64_t tokens, const PlanOptions& options) {
  const std::int64_t m = tokens * c.top_k;
  HostWorkspace ws;
  RAGDOT_ASSIGN_OR_RETURN(ExpertFfn routed, ExpertFfn::create(m, c.experts, c.hidden, c.ffn, c.activation, options, ws));
  // one shared expert at a time: one group holding every token
  RAGDOT_ASSIGN_OR_RETURN(ExpertFfn shared, ExpertFfn::create(tokens, 1, c.hidden, c.ffn, c.activation, options, ws));
  std::vector<Plan> router;
  for (const RaggedDotSpec& spec : router_specs(tokens, c.hidden, c.experts)) {
    RAGDOT_ASSIGN_OR_RETURN(Plan plan, plan_host(spec, options, ws));
    router.push_back(std::move(plan));
  }
  auto s = std::make_unique<State>(std::move(ws), std::move(routed), std::move(shared), std::move(router));
  s->c = c;
  s->tokens = tokens;
  s->has_shared = c.shared_experts > 0;
  s->shared_gs = {tokens};
  const std::int64_t h = c.hidden, f = c.ffn;
  s->logits.resize(std::size_t(tokens * c.experts));
  s->rows.resize(std::size_t(m * h));
  s->up.resize(std::size_t(m * 2 * f));
  s->act.resize(std::size_t(m * f));
  s->out.resize(std::size_t(m * h));
  const std::size_t sh = std::size_t(c.shared_experts);
  s->s_up.resize(sh * std::size_t(tokens * 2 * f));
  s->s_act.resize(sh * std::size_t(tokens * f));
  s->s_out.resize(std::size_t(tokens * h));
  s->routing.experts.resize(std::size_t(m));
  s->routing.weights.resize(std::size_t(m));
  s->routing.input_scale.resize(std::size_t(tokens));
  s->route_scratch.resize(std::size_t(c.experts));
  s->d_rows_out.resize(std::size_t(m * h));
  s->d_act.resize(std::size_t(m * f));
  s->d_up.resize(std::size_t(m * 2 * f));
  s->d_rows_in.resize(std::size_t(m * h));
  s->d_weights.resize(std::size_t(m));
  s->d_scale.resize(std::size_t(tokens));
  s->d_logits.resize(std::size_t(tokens * c.experts));
  s->d_x_router.resize(std::size_t(tokens * h));
  if (s->has_shared) {
    s->s_d_act.resize(std::size_t(tokens * f));
    s->s_d_up.resize(std::size_t(tokens * 2 * f));
    s->s_d_in.resize(std::size_t(tokens * h));
  }
  return MoeLayer(std::move(s));
}

const MoeConfig& MoeLayer::config() const { return s_->c; }
std::int64_t MoeLayer::tokens() const { return s_->tokens; }
const MoeRouting& MoeLayer::routing() const { return s_->routing; }

std::string MoeLayer::describe() const {
  std::string d = "router: " + s_->router[kRouterLogits].to_string() + "\n";
  d += "routed experts (" + std::to_string(s_->c.experts) + " groups, " + activation_name(s_->c.activation) +
       "):\n" + s_->routed.describe();
  if (s_->has_shared) d += "shared experts (x" + std::to_string(s_->c.shared_experts) + "):\n" + s_->shared.describe();
  return d;
}

namespace {

Status check_params(const MoeConfig& c, const MoeParams& p) {
  if (!p.router || !p.w_up || !p.w_down) return invalid_argument("MoE params: router, w_up and w_down are required");
  if (c.shared_experts > 0 && (!p.shared_up || !p.shared_down))
    return invalid_argument("MoE params: this config has shared experts: shared_up and shared_down are required");
  return Status::ok();
}

}  // namespace

Status MoeLayer::forward(const float* x, const MoeParams& p, float* y) {
  State& s = *s_;
  const MoeConfig& c = s.c;
  if (!x || !y) return invalid_argument("MoE forward: x and y are required");
  RAGDOT_RETURN_IF_ERROR(check_params(c, p));
  const std::int64_t t = s.tokens, h = c.hidden, f = c.ffn, e = c.experts, k = c.top_k;
  const MutableBuffer ws = s.ws.buffer();
  RAGDOT_RETURN_IF_ERROR(run_host(s.router[kRouterLogits], x, p.router, s.shared_gs.data(), s.logits.data(), ws));
  for (std::int64_t i = 0; i < t; ++i) {
    route_token(c.router, s.logits.data() + i * e, p.router_bias, e, k, c.routed_scaling,
                {s.routing.experts.data() + i * k, s.routing.weights.data() + i * k, s.routing.input_scale.data() + i},
                s.route_scratch.data());
  }
  sort_by_expert(s.routing.experts.data(), t * k, e, s.perm);
  s.routing.group_sizes = s.perm.group_sizes;
  const bool scaled = c.router == RouterKind::kLlama4;
  gather_rows(s.perm, x, scaled ? s.routing.input_scale.data() : nullptr, k, h, s.rows.data());
  RAGDOT_RETURN_IF_ERROR(
      s.routed.forward(s.rows.data(), p.w_up, p.w_down, s.perm.group_sizes.data(), s.up.data(), s.act.data(), s.out.data(),
                                         ws, &s.routing.dropped_pairs));
  combine_rows(s.perm, s.out.data(), s.routing.weights.data(), t, k, h, false, y);
  for (std::int64_t j = 0; j < c.shared_experts; ++j) {
    float* up = s.s_up.data() + j * t * 2 * f;
    float* act = s.s_act.data() + j * t * f;
    RAGDOT_RETURN_IF_ERROR(s.shared.forward(x, p.shared_up + j * h * 2 * f, p.shared_down + j * f * h,
                                            s.shared_gs.data(), up, act, s.s_out.data(), ws));
    for (std::int64_t i = 0; i < t * h; ++i) y[i] += s.s_out[i];
  }
  s.forwarded = true;
  return Status::ok();
}

Status MoeLayer::backward(const float* x, const MoeParams& p, const float* dy, const MoeGrads& g) {
  State& s = *s_;
  const MoeConfig& c = s.c;
  if (!s.forwarded) return invalid_argument("MoE backward: run forward first");
  if (!x || !dy || !g.d_x) return invalid_argument("MoE backward: x, dy and grads.d_x are required");
  RAGDOT_RETURN_IF_ERROR(check_params(c, p));
  const std::int64_t t = s.tokens, h = c.hidden, f = c.ffn, e = c.experts, k = c.top_k, m = t * k;
  const MutableBuffer ws = s.ws.buffer();

  // combine: y[t] = sum_j w[t,j] out[row(t,j)]  ->  d_out[row] = w dy[t], d_w = dy[t] . out[row]
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t r = s.perm.row_of[i];
    const float* d = dy + (i / k) * h;
    const float* o = s.out.data() + r * h;
    float* dr = s.d_rows_out.data() + r * h;
    const float w = s.routing.weights[i];
    double dot = 0;
    for (std::int64_t col = 0; col < h; ++col) {
      dr[col] = w * d[col];
      dot += double(d[col]) * o[col];
    }
    s.d_weights[i] = float(dot);
  }
  RAGDOT_RETURN_IF_ERROR(s.routed.backward(s.rows.data(), s.up.data(), s.act.data(), p.w_up, p.w_down,
                                           s.perm.group_sizes.data(), s.d_rows_out.data(), s.d_act.data(),
                                           s.d_up.data(), s.d_rows_in.data(), g.d_w_up, g.d_w_down, ws));
  // gather: rows[r] = scale[t] x[t]  ->  d_x[t] += scale[t] d_rows[r], d_scale[t] += d_rows[r] . x[t]
  const bool scaled = c.router == RouterKind::kLlama4;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < t; ++i) {
    float* dx = g.d_x + i * h;
    std::fill(dx, dx + h, 0.0f);
    double dscale = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const float* dr = s.d_rows_in.data() + s.perm.row_of[i * k + j] * h;
      const float sc = scaled ? s.routing.input_scale[i] : 1.0f;
      for (std::int64_t col = 0; col < h; ++col) {
        dx[col] += sc * dr[col];
        dscale += double(dr[col]) * x[i * h + col];
      }
    }
    s.d_scale[i] = float(dscale);
  }
  // router: logits = x Wr  ->  d_x += d_logits Wr^T, d_Wr = x^T d_logits
  for (std::int64_t i = 0; i < t; ++i) {
    route_token_backward(c.router, s.logits.data() + i * e, e, k, c.routed_scaling, s.routing.experts.data() + i * k,
                         s.d_weights.data() + i * k, s.d_scale[i], s.d_logits.data() + i * e, s.route_scratch.data());
  }
  RAGDOT_RETURN_IF_ERROR(run_host(s.router[kRouterDataGrad], s.d_logits.data(), p.router, s.shared_gs.data(),
                                  s.d_x_router.data(), ws));
  for (std::int64_t i = 0; i < t * h; ++i) g.d_x[i] += s.d_x_router[i];
  if (g.d_router) {
    RAGDOT_RETURN_IF_ERROR(run_host(s.router[kRouterWeightGrad], x, s.d_logits.data(), s.shared_gs.data(),
                                    g.d_router, ws));
  }
  // shared experts: y += FFN_j(x) -> d_x += d_in_j
  for (std::int64_t j = 0; j < c.shared_experts; ++j) {
    RAGDOT_RETURN_IF_ERROR(s.shared.backward(
        x, s.s_up.data() + j * t * 2 * f, s.s_act.data() + j * t * f, p.shared_up + j * h * 2 * f,
        p.shared_down + j * f * h, s.shared_gs.data(), dy, s.s_d_act.data(), s.s_d_up.data(), s.s_d_in.data(),
        g.d_shared_up ? g.d_shared_up + j * h * 2 * f : nullptr, g.d_shared_down ? g.d_shared_down + j * f * h : nullptr,
        ws));
    for (std::int64_t i = 0; i < t * h; ++i) g.d_x[i] += s.s_d_in[i];
  }
  return Status::ok();
}

}  // namespace ragdot::moe
