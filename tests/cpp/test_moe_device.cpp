// The MoE layer's device permutation (moe/device_permutation.hpp) against a host oracle: the
// stable sort by expert with both sort kernels (group sizes, sorted rows, their tokens and combine
// weights, out-of-range experts counted and given no row) for pair counts around the chunk size,
// 1 to 1024 experts, uniform, skewed and all-in-one routing; the gather (with and without a
// per-token scale) and the combine's backward with both row kernels; the weighted combine
// (overwrite and accumulate) and the rounding of f32 sums an expert GEMM added the rows into
// (finish_combine); bf16 and f32, rows that allow 16-byte accesses and rows that do not; the
// routers of every preset kind and SwiGLU against moe/router.cpp and moe/expert_ffn.cpp.
// Outputs are poisoned first. Label "gpu": skipped (not failed) where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/reference.hpp"
#include "gpu_test_support.hpp"
#include "moe_device_support.hpp"
#include "moe/device_moe_ops.hpp"
#include "moe/device_permutation.hpp"
#include "moe/gated_activation.hpp"
#include "moe/router.hpp"
#include "ragdot/moe_device.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot {
namespace {

using gpu_test::gpu;
using namespace moe_test;  // NOLINT: DeviceBuffer, upload, download, poison, bf16 helpers

struct HostSort {
  std::vector<int> group_sizes, row_of, pair_of;
  int bad = 0;
};

// The oracle: a stable counting sort; out-of-range experts get row -1, rows past the valid
// ones have pair -1.
HostSort host_sort(const std::vector<int>& experts, int num_experts) {
  HostSort h;
  const std::size_t n = experts.size();
  h.group_sizes.assign(std::size_t(num_experts), 0);
  h.row_of.assign(n, -1);
  h.pair_of.assign(n, -1);
  for (int e : experts) {
    if (e >= 0 && e < num_experts) ++h.group_sizes[std::size_t(e)];
    else ++h.bad;
  }
  std::vector<int> next(std::size_t(num_experts), 0);
  for (int e = 1; e < num_experts; ++e) next[std::size_t(e)] = next[std::size_t(e - 1)] + h.group_sizes[std::size_t(e - 1)];
  for (std::size_t i = 0; i < n; ++i) {
    const int e = experts[i];
    if (e < 0 || e >= num_experts) continue;
    const int r = next[std::size_t(e)]++;
    h.row_of[i] = r;
    h.pair_of[std::size_t(r)] = int(i);
  }
  return h;
}

enum class Routing { kUniform, kSkewed, kAllInOne, kSomeOutOfRange };

std::vector<int> route(std::int64_t pairs, int experts, Routing how, workloads::SplitMix64& rng) {
  std::vector<int> v(static_cast<std::size_t>(pairs));
  for (auto& e : v) {
    const double u = rng.uniform();
    switch (how) {
      case Routing::kUniform: e = int(u * experts) % experts; break;
      case Routing::kSkewed: e = int(u * u * u * experts) % experts; break;
      case Routing::kAllInOne: e = experts / 2; break;
      case Routing::kSomeOutOfRange: e = u < 0.05 ? -1 : u < 0.1 ? experts + 3 : int(u * experts) % experts; break;
    }
  }
  return v;
}

// Both sort kernels against the stable host sort, poisoned outputs first, on every combination of
// the expert counts, pair counts and routings given; returns the cases run.
int check_sorts(std::initializer_list<int> expert_counts, std::initializer_list<std::int64_t> pair_counts,
                std::uint64_t seed) {
  workloads::SplitMix64 rng(seed);
  int cases = 0;
  for (moe::SortKernel kind : {moe::SortKernel::kChunked, moe::SortKernel::kOneBlock}) {
    for (int experts : expert_counts) {
      for (std::int64_t pairs : pair_counts) {
        for (Routing how : {Routing::kUniform, Routing::kSkewed, Routing::kAllInOne, Routing::kSomeOutOfRange}) {
          moe::PermutationKernels kernels;
          kernels.sort = kind;
          auto perm = moe::DevicePermutation::create(0, 40000, experts, kernels);
          EXPECT_TRUE(perm.ok()) << perm.status().to_string();
          if (!perm.ok()) return cases;
          const std::vector<int> ex = route(pairs, experts, how, rng);
          const HostSort want = host_sort(ex, experts);
          DeviceBuffer d_ex(ex.size() * 4), gs(std::size_t(experts) * 4), row_of(ex.size() * 4), pair_of(ex.size() * 4),
              bad(4), ws(perm->sort_workspace_bytes()), token_of(ex.size() * 4), pair_w(ex.size() * 4),
              weight_of(ex.size() * 4);
          std::vector<float> w(ex.size());
          for (auto& v : w) v = float(0.25 + rng.uniform());
          upload(d_ex, ex);
          upload(pair_w, w);
          poison(weight_of, ex.size() * 4);
          poison(gs, std::size_t(experts) * 4);
          poison(row_of, ex.size() * 4);
          poison(pair_of, ex.size() * 4);
          poison(bad, 4);
          poison(token_of, ex.size() * 4);
          const moe::DeviceSortBuffers out{gs.p, row_of.p, pair_of.p, bad.p, token_of.p, weight_of.p};
          constexpr int kTopK = 3;  // token_of = pair / 3
          Status st = perm->sort(d_ex.p, pairs, out, ws.p, gpu()->stream(), kTopK, static_cast<const float*>(pair_w.p));
          EXPECT_TRUE(st.is_ok()) << st.to_string();
          const std::string what = std::string(kind == moe::SortKernel::kOneBlock ? "one block, " : "chunked, ") +
                                   std::to_string(pairs) + " pairs, " + std::to_string(experts) + " experts, routing " +
                                   std::to_string(int(how));
          EXPECT_EQ(download<int>(gs, std::size_t(experts)), want.group_sizes) << what;
          EXPECT_EQ(download<int>(bad, 1)[0], want.bad) << what;
          if (pairs > 0) {
            EXPECT_EQ(download<int>(row_of, ex.size()), want.row_of) << what;
            EXPECT_EQ(download<int>(pair_of, ex.size()), want.pair_of) << what;
            std::vector<int> want_token(ex.size());
            for (std::size_t r = 0; r < ex.size(); ++r) want_token[r] = want.pair_of[r] < 0 ? -1 : want.pair_of[r] / kTopK;
            EXPECT_EQ(download<int>(token_of, ex.size()), want_token) << what;
            std::vector<float> want_weight(ex.size());
            for (std::size_t r = 0; r < ex.size(); ++r)
              want_weight[r] = want.pair_of[r] < 0 ? 0.0f : w[std::size_t(want.pair_of[r])];
            EXPECT_EQ(download<float>(weight_of, ex.size()), want_weight) << what;
          }
          ++cases;
        }
      }
    }
  }
  return cases;
}

// Both sort kernels: the chunked one (pair counts around its chunk of 256) and the one-block one
// (runs of pairs per warp shorter than a lane's batch of loads, and several batches long). The
// expert counts give the chunked sort's offsets kernel every split of an expert's column among
// lanes (32 lanes for up to 32 experts, then 16, 8, 4, 2 and 1 as experts double) and expert
// counts that leave its last warp partly filled (3, 101, 600); 32771 pairs make 129 chunks, which
// no split divides evenly.
TEST(MoeDevicePermutation, SortMatchesTheStableHostSort) {
  REQUIRE_GPU();
  EXPECT_EQ(check_sorts({1, 3, 8, 64, 101, 128, 256, 384, 600, 1024}, {0, 1, 255, 256, 257, 32771}, 7),
            2 * 10 * 6 * 4);
}

// A few of those, for compute-sanitizer (scripts/gpu_check.sh): the one-block sort's shared table.
TEST(MoeDevicePermutation, SortSmall) {
  REQUIRE_GPU();
  EXPECT_EQ(check_sorts({8, 1024}, {257, 3001}, 8), 2 * 2 * 2 * 4);
}

// The sort kernel comes from RAGDOT_MOE_SORT; a value it does not know is an error, not a default.
TEST(MoeDevicePermutation, SortKernelFromTheEnvironment) {
  REQUIRE_GPU();
  const char* before = std::getenv("RAGDOT_MOE_SORT");
  const std::string saved = before ? before : "";
  ::setenv("RAGDOT_MOE_SORT", "one_block", 1);
  auto kind = moe::sort_kernel_from_env();
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, moe::SortKernel::kOneBlock);
  EXPECT_TRUE(moe::DevicePermutation::create(0, 100, 8).ok());
  ::setenv("RAGDOT_MOE_SORT", "radix", 1);
  EXPECT_FALSE(moe::sort_kernel_from_env().ok());
  auto bad = moe::DevicePermutation::create(0, 100, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("RAGDOT_MOE_SORT"), std::string::npos) << bad.status().to_string();
  ::unsetenv("RAGDOT_MOE_SORT");
  kind = moe::sort_kernel_from_env();
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, moe::SortKernel::kChunked);
  if (before) ::setenv("RAGDOT_MOE_SORT", saved.c_str(), 1);
}

TEST(MoeDevicePermutation, RejectsBadArguments) {
  REQUIRE_GPU();
  EXPECT_FALSE(moe::DevicePermutation::create(0, 100, 0).ok());
  EXPECT_FALSE(moe::DevicePermutation::create(0, 100, 1025).ok());
  EXPECT_FALSE(moe::DevicePermutation::create(0, -1, 8).ok());
  auto perm = moe::DevicePermutation::create(0, 100, 8);
  ASSERT_TRUE(perm.ok()) << perm.status().to_string();
  DeviceBuffer a(1024), b(1024), c(1024), d(1024), ws(perm->sort_workspace_bytes());
  const moe::DeviceSortBuffers out{a.p, b.p, c.p, d.p};
  EXPECT_FALSE(perm->sort(a.p, 101, out, ws.p, nullptr).is_ok());
  EXPECT_FALSE(perm->sort(nullptr, 10, out, ws.p, nullptr).is_ok());
  EXPECT_FALSE(perm->gather(a.p, nullptr, out, 30, 4, 8, DType::kF32, b.p, nullptr).is_ok());  // 120 pairs > 100
  EXPECT_FALSE(perm->gather(a.p, nullptr, out, 10, 4, 8, DType::kF16, b.p, nullptr).is_ok());
  EXPECT_FALSE(perm->combine(a.p, nullptr, out, 10, 4, 8, DType::kF32, false, b.p, nullptr).is_ok());
}

TEST(MoeDevicePermutation, GatherAndCombineMatchTheHost) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(11);
  const std::int64_t tokens = 300, top_k = 4, experts = 16, pairs = tokens * top_k;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    // 2056: rows longer than the warp gather's stretch of loads per lane, and not a whole number of them
    for (std::int64_t hidden : {std::int64_t(64), std::int64_t(33), std::int64_t(2056)}) {
      // 0: plain rows; 1: scaled per token (Llama-4's input); 2: per pair (the combine weights, backward)
      for (int scaling : {0, 1, 2}) {
        const bool scaled = scaling == 1, weighted = scaling == 2;
        for (int case_index = 0; case_index < 4; ++case_index) {
          const bool accumulate = case_index & 1, warps = case_index & 2;
          const std::string what = std::string(dtype_name(dt)) + " hidden " + std::to_string(hidden) +
                                   (scaled ? " scaled" : "") + (weighted ? " weighted" : "") +
                                   (accumulate ? " accumulate" : "") +
                                   (warps ? " warp gather" : " block gather");
          moe::PermutationKernels kernels;
          kernels.gather = kernels.combine_backward = warps ? moe::RowKernel::kWarps : moe::RowKernel::kBlock;
          auto perm = moe::DevicePermutation::create(0, pairs, experts, kernels);
          ASSERT_TRUE(perm.ok()) << perm.status().to_string();
          // one pair in 20 routed out of range: no row, no contribution
          std::vector<int> ex = route(pairs, int(experts), Routing::kSomeOutOfRange, rng);
          const HostSort hs = host_sort(ex, int(experts));
          const auto n_x = static_cast<std::size_t>(tokens * hidden);
          std::vector<float> x(n_x), scale(static_cast<std::size_t>(tokens)), w(static_cast<std::size_t>(pairs)), y0(n_x);
          for (auto& v : x) v = float(rng.uniform() * 2 - 1);
          for (auto& v : scale) v = float(0.5 + rng.uniform());
          for (auto& v : w) v = float(rng.uniform());
          for (auto& v : y0) v = float(rng.uniform() - 0.5);
          const auto xb = from_f32(x, dt), y0b = from_f32(y0, dt);
          const std::size_t es = dtype_size(dt), row_bytes = std::size_t(hidden) * es;
          DeviceBuffer d_ex(std::size_t(pairs) * 4), gs(std::size_t(experts) * 4), row_of(std::size_t(pairs) * 4),
              pair_of(std::size_t(pairs) * 4), bad(4), ws(perm->sort_workspace_bytes()), d_x(xb.size()),
              d_scale(scale.size() * 4), d_w(w.size() * 4), rows(std::size_t(pairs) * row_bytes), y(y0b.size());
          upload(d_ex, ex);
          upload(d_x, xb);
          upload(d_scale, scale);
          upload(d_w, w);
          upload(y, y0b);
          poison(rows, std::size_t(pairs) * row_bytes);
          const moe::DeviceSortBuffers sorted{gs.p, row_of.p, pair_of.p, bad.p};
          ASSERT_TRUE(perm->sort(d_ex.p, pairs, sorted, ws.p, gpu()->stream()).is_ok());
          Status st = perm->gather(d_x.p, scaled ? static_cast<const float*>(d_scale.p) : nullptr, sorted, tokens,
                                   top_k, hidden, dt, rows.p, gpu()->stream(),
                                   weighted ? static_cast<const float*>(d_w.p) : nullptr);
          ASSERT_TRUE(st.is_ok()) << st.to_string();
          EXPECT_FALSE(perm->gather(d_x.p, static_cast<const float*>(d_scale.p), sorted, tokens, top_k, hidden, dt,
                                    rows.p, gpu()->stream(), static_cast<const float*>(d_w.p))
                           .is_ok());  // a scale and weights: refused, nothing written
          // gather: row r is x[t] (times scale[t] or w[pair], rounded to the row type), rows past the valid ones zero
          const auto got_rows = as_f32(download<unsigned char>(rows, std::size_t(pairs) * row_bytes), dt);
          const auto xr = as_f32(xb, dt);
          std::vector<float> want_rows(std::size_t(pairs * hidden), 0.0f);
          for (std::int64_t r = 0; r < pairs; ++r) {
            const int p = hs.pair_of[std::size_t(r)];
            if (p < 0) continue;
            const std::int64_t t = p / top_k;
            for (std::int64_t c = 0; c < hidden; ++c) {
              const float v = xr[std::size_t(t * hidden + c)] *
                              (scaled ? scale[std::size_t(t)] : weighted ? w[std::size_t(p)] : 1.0f);
              want_rows[std::size_t(r * hidden + c)] = dt == DType::kF32 ? v : to_f32(to_bf16(v));
            }
          }
          EXPECT_EQ(got_rows, want_rows) << what;
          // combine: y[t] (+)= sum_j w[t, j] * rows[row_of[t, j]]
          st = perm->combine(rows.p, static_cast<const float*>(d_w.p), sorted, tokens, top_k, hidden, dt, accumulate,
                             y.p, gpu()->stream());
          ASSERT_TRUE(st.is_ok()) << st.to_string();
          const auto got_y = as_f32(download<unsigned char>(y, y0b.size()), dt);
          const auto y0r = as_f32(y0b, dt);
          double worst = 0;
          for (std::int64_t t = 0; t < tokens; ++t) {
            for (std::int64_t c = 0; c < hidden; ++c) {
              double acc = accumulate ? y0r[std::size_t(t * hidden + c)] : 0.0;
              for (std::int64_t j = 0; j < top_k; ++j) {
                const int r = hs.row_of[std::size_t(t * top_k + j)];
                if (r >= 0) acc += double(w[std::size_t(t * top_k + j)]) * want_rows[std::size_t(r * hidden + c)];
              }
              const double g = got_y[std::size_t(t * hidden + c)];
              worst = std::max(worst, std::abs(g - acc) / (1.0 + std::abs(acc)));
            }
          }
          EXPECT_LT(worst, dt == DType::kF32 ? 1e-5 : 8e-3) << what;
        }
      }
    }
  }
}

// The end of a combine whose rows an expert GEMM added into f32 sums: y = sums + addend, rounded,
// for bf16 and f32 rows of a length that allows 8-wide accesses and one that does not.
TEST(MoeDevicePermutation, FinishCombineRoundsTheSumsPlusTheAddend) {
  REQUIRE_GPU();
  auto perm = moe::DevicePermutation::create(0, 64, 4);
  ASSERT_TRUE(perm.ok()) << perm.status().to_string();
  workloads::SplitMix64 rng(13);
  const std::int64_t tokens = 37;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (std::int64_t hidden : {std::int64_t(64), std::int64_t(33)}) {
      for (bool with_addend : {false, true}) {
        const auto n = std::size_t(tokens * hidden);
        std::vector<float> sums(n), addend(n);
        for (auto& v : sums) v = float(rng.uniform() * 4 - 2);
        for (auto& v : addend) v = float(rng.uniform() - 0.5);
        const auto addend_rows = from_f32(addend, dt);
        DeviceBuffer d_sums(n * 4), d_addend(addend_rows.size()), y(n * dtype_size(dt));
        upload(d_sums, sums);
        upload(d_addend, addend_rows);
        poison(y, n * dtype_size(dt));
        Status st = perm->finish_combine(static_cast<const float*>(d_sums.p), with_addend ? d_addend.p : nullptr,
                                         tokens, hidden, dt, y.p, gpu()->stream());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        const auto got = as_f32(download<unsigned char>(y, n * dtype_size(dt)), dt);
        const auto added = as_f32(addend_rows, dt);
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i) {
          const float v = sums[i] + (with_addend ? added[i] : 0.0f);
          want[i] = dt == DType::kF32 ? v : to_f32(to_bf16(v));
        }
        EXPECT_EQ(got, want) << dtype_name(dt) << " hidden " << hidden << (with_addend ? " with addend" : "");
      }
    }
  }
  EXPECT_FALSE(perm->finish_combine(nullptr, nullptr, 4, 8, DType::kBF16, nullptr, gpu()->stream()).is_ok());
  EXPECT_FALSE(perm->finish_combine(nullptr, nullptr, 4, 8, DType::kF16, nullptr, gpu()->stream()).is_ok());
}

// Every preset's router kind at its size, and the largest the device router takes.
struct RouterCase {
  workloads::RouterKind kind;
  std::int64_t experts, k;
  double scaling;
};
const RouterCase kRouterCases[] = {{workloads::RouterKind::kSoftmaxTopK, 8, 2, 1.0},
                                   {workloads::RouterKind::kSoftmaxTopKRenormalized, 128, 8, 1.0},
                                   {workloads::RouterKind::kDeepSeekV3, 256, 8, 2.5},
                                   {workloads::RouterKind::kLlama4, 16, 1, 1.0},
                                   {workloads::RouterKind::kSoftmaxTopK, 1024, 16, 1.0}};

TEST(MoeDeviceOps, RoutersMatchTheHost) {
  REQUIRE_GPU();
  using workloads::RouterKind;
  workloads::SplitMix64 rng(13);
  const std::int64_t tokens = 333;
  for (const auto& rt : kRouterCases) {
    const std::string what = "router " + std::to_string(int(rt.kind)) + " experts " + std::to_string(rt.experts) +
                             " k " + std::to_string(rt.k);
    auto ops = moe::DeviceMoeOps::create(0, rt.kind, rt.experts, rt.k, rt.scaling);
    ASSERT_TRUE(ops.ok()) << ops.status().to_string();
    std::vector<float> logits(static_cast<std::size_t>(tokens * rt.experts)), bias(static_cast<std::size_t>(rt.experts));
    for (auto& v : logits) v = float(rng.uniform() * 8 - 4);
    for (auto& v : bias) v = float(rng.uniform() * 0.2 - 0.1);
    const std::size_t pairs = static_cast<std::size_t>(tokens * rt.k);
    DeviceBuffer d_logits(logits.size() * 4), d_bias(bias.size() * 4), d_ex(pairs * 4), d_w(pairs * 4),
        d_scale(static_cast<std::size_t>(tokens) * 4);
    upload(d_logits, logits);
    upload(d_bias, bias);
    poison(d_ex, pairs * 4);
    poison(d_w, pairs * 4);
    poison(d_scale, static_cast<std::size_t>(tokens) * 4);
    Status st = ops->route(static_cast<const float*>(d_logits.p), static_cast<const float*>(d_bias.p), tokens, d_ex.p,
                           static_cast<float*>(d_w.p), static_cast<float*>(d_scale.p), gpu()->stream());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto got_ex = download<int>(d_ex, pairs);
    const auto got_w = download<float>(d_w, pairs);
    const auto got_scale = download<float>(d_scale, static_cast<std::size_t>(tokens));
    std::vector<double> scratch(static_cast<std::size_t>(rt.experts));
    std::vector<std::int32_t> want_ex(static_cast<std::size_t>(rt.k));
    std::vector<float> want_w(static_cast<std::size_t>(rt.k));
    float want_scale = 0;
    // The selection score in float64, as the host router ranks experts. The device ranks in float32,
    // so two experts whose scores lie within float32 rounding may come out in either order: such a
    // swap is allowed (and that token's weights then differ legitimately); any other difference is not.
    auto score = [&](std::int64_t t, std::int32_t e) {
      const double z = logits[static_cast<std::size_t>(t * rt.experts + e)];
      return rt.kind == RouterKind::kDeepSeekV3 ? 1.0 / (1.0 + std::exp(-z)) + bias[static_cast<std::size_t>(e)] : z;
    };
    int mismatched = 0, near_ties = 0;
    double worst = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      moe::route_token(rt.kind, logits.data() + t * rt.experts, bias.data(), rt.experts, rt.k, rt.scaling,
                       {want_ex.data(), want_w.data(), &want_scale}, scratch.data());
      bool tie_flipped = false;
      for (std::int64_t j = 0; j < rt.k; ++j) {
        const std::size_t i = static_cast<std::size_t>(t * rt.k + j);
        const std::int32_t got = got_ex[i], want = want_ex[static_cast<std::size_t>(j)];
        if (got == want) continue;
        if (got >= 0 && got < rt.experts && std::abs(score(t, got) - score(t, want)) <= 1e-6) {
          tie_flipped = true;
          ++near_ties;
          continue;
        }
        if (++mismatched <= 3)
          ADD_FAILURE() << what << ": token " << t << " slot " << j << " got expert " << got << " (score "
                        << (got >= 0 && got < rt.experts ? score(t, got) : -1.0) << "), want " << want << " (score "
                        << score(t, want) << ")";
      }
      if (tie_flipped) continue;
      for (std::int64_t j = 0; j < rt.k; ++j) {
        const std::size_t i = static_cast<std::size_t>(t * rt.k + j);
        worst = std::max(worst, double(std::abs(got_w[i] - want_w[static_cast<std::size_t>(j)])));
      }
      worst = std::max(worst, double(std::abs(got_scale[static_cast<std::size_t>(t)] - want_scale)));
    }
    EXPECT_LE(near_ties, 4) << what << ": more float32 near-ties than rounding explains";
    EXPECT_EQ(mismatched, 0) << what;
    EXPECT_LT(worst, 2e-5 * rt.scaling) << what;
  }
  EXPECT_FALSE(moe::DeviceMoeOps::create(0, RouterKind::kSoftmaxTopK, 8, 9, 1.0).ok());
  EXPECT_FALSE(moe::DeviceMoeOps::create(0, RouterKind::kSoftmaxTopK, 2048, 8, 1.0).ok());
}

const moe::GatedActivation kActivations[] = {moe::GatedActivation::kSwiGLU, moe::GatedActivation::kGeGLU,
                                             moe::GatedActivation::kGeGLUTanh};

TEST(MoeDeviceOps, GatedActivationsMatchTheHost) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(17);
  auto ops = moe::DeviceMoeOps::create(0, workloads::RouterKind::kSoftmaxTopK, 8, 2, 1.0);
  ASSERT_TRUE(ops.ok()) << ops.status().to_string();
  for (moe::GatedActivation a : kActivations) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const std::int64_t rows = 257, ffn = 96;
      std::vector<float> up(static_cast<std::size_t>(rows * 2 * ffn));
      for (auto& v : up) v = float(rng.uniform() * 6 - 3);
      const auto upb = from_f32(up, dt);
      const auto upr = as_f32(upb, dt);
      std::vector<float> want(static_cast<std::size_t>(rows * ffn));
      moe::gated_activation(a, upr.data(), rows, ffn, want.data());
      const std::size_t act_bytes = want.size() * dtype_size(dt);
      DeviceBuffer d_up(upb.size()), d_act(act_bytes);
      upload(d_up, upb);
      poison(d_act, act_bytes);
      Status st = ops->glu(a, d_up.p, rows, ffn, dt, d_act.p, gpu()->stream());
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      const auto got = as_f32(download<unsigned char>(d_act, act_bytes), dt);
      double worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
      EXPECT_LT(worst, dt == DType::kF32 ? 1e-5 : 8e-3) << moe::activation_name(a) << " " << dtype_name(dt);
    }
  }
  EXPECT_FALSE(ops->glu(moe::GatedActivation::kSwiGLU, nullptr, 4, 4, DType::kF16, nullptr, nullptr).is_ok());
  DeviceBuffer d_up(64), d_act(32);
  EXPECT_FALSE(ops->glu(static_cast<moe::GatedActivation>(7), d_up.p, 4, 4, DType::kBF16, d_act.p, nullptr).is_ok());
}

}  // namespace
}  // namespace ragdot

namespace ragdot {
namespace {

using gpu_test::gpu;
using namespace moe_test;  // NOLINT

TEST(MoeDevicePermutation, CombineBackwardMatchesTheHost) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(19);
  const std::int64_t tokens = 150, top_k = 3, experts = 8, pairs = tokens * top_k;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    // 1032: rows longer than the warp kernel's stretch of loads per lane, and not a whole number of them
    for (std::int64_t hidden : {std::int64_t(128), std::int64_t(41), std::int64_t(1032)}) {
      for (int case_index = 0; case_index < 4; ++case_index) {
        const bool with_rows = case_index & 1;  // false: dots only, as for the input scale's gradient
        const bool warps = case_index & 2;
        const std::string what = std::string(dtype_name(dt)) + " hidden " + std::to_string(hidden) +
                                 (with_rows ? "" : " dots only") + (warps ? " warp kernel" : " block kernel");
        moe::PermutationKernels kernels;
        kernels.gather = kernels.combine_backward = warps ? moe::RowKernel::kWarps : moe::RowKernel::kBlock;
        auto perm = moe::DevicePermutation::create(0, pairs, experts, kernels);
        ASSERT_TRUE(perm.ok()) << perm.status().to_string();
        std::vector<int> ex = route(pairs, int(experts), Routing::kSkewed, rng);
        const HostSort hs = host_sort(ex, int(experts));
        const std::size_t n_tok = std::size_t(tokens * hidden), n_rows = std::size_t(pairs * hidden);
        std::vector<float> dy(n_tok), rows(n_rows), w(static_cast<std::size_t>(pairs));
        for (auto& v : dy) v = float(rng.uniform() * 2 - 1);
        for (auto& v : rows) v = float(rng.uniform() * 2 - 1);
        for (auto& v : w) v = float(rng.uniform());
        const auto dyb = from_f32(dy, dt), rowsb = from_f32(rows, dt);
        const auto dyr = as_f32(dyb, dt), rowsr = as_f32(rowsb, dt);
        const std::size_t es = dtype_size(dt);
        DeviceBuffer d_ex(std::size_t(pairs) * 4), gs(std::size_t(experts) * 4), row_of(std::size_t(pairs) * 4),
            pair_of(std::size_t(pairs) * 4), bad(4), ws(perm->sort_workspace_bytes()), d_dy(dyb.size()),
            d_rows(rowsb.size()), d_w(w.size() * 4), scaled(n_rows * es), dots(std::size_t(pairs) * 4);
        upload(d_ex, ex);
        upload(d_dy, dyb);
        upload(d_rows, rowsb);
        upload(d_w, w);
        poison(scaled, n_rows * es);
        poison(dots, std::size_t(pairs) * 4);
        const moe::DeviceSortBuffers sorted{gs.p, row_of.p, pair_of.p, bad.p};
        ASSERT_TRUE(perm->sort(d_ex.p, pairs, sorted, ws.p, gpu()->stream()).is_ok());
        Status st = perm->combine_backward(d_dy.p, d_rows.p, static_cast<const float*>(d_w.p), sorted, tokens, top_k,
                                           hidden, dt, with_rows ? scaled.p : nullptr, static_cast<float*>(dots.p),
                                           gpu()->stream());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        const auto got_dots = download<float>(dots, std::size_t(pairs));
        const auto got_scaled = as_f32(download<unsigned char>(scaled, n_rows * es), dt);
        double worst_dot = 0, worst_row = 0;
        for (std::int64_t r = 0; r < pairs; ++r) {
          const int p = hs.pair_of[std::size_t(r)];
          const std::int64_t t = p / top_k;
          double dot = 0;
          for (std::int64_t c = 0; c < hidden; ++c) {
            const float a = dyr[std::size_t(t * hidden + c)];
            dot += double(a) * rowsr[std::size_t(r * hidden + c)];
            if (with_rows) {
              const float want = w[std::size_t(p)] * a;
              const float want_r = dt == DType::kF32 ? want : round_bf16(want);
              worst_row = std::max(worst_row, double(std::abs(got_scaled[std::size_t(r * hidden + c)] - want_r)));
            }
          }
          worst_dot = std::max(worst_dot, std::abs(got_dots[std::size_t(p)] - dot) / (1.0 + std::abs(dot)));
        }
        EXPECT_LT(worst_dot, 1e-5) << what;
        EXPECT_LT(worst_row, 1e-6) << what;  // the same product, rounded the same way
      }
    }
  }
}

TEST(MoeDevicePermutation, CombineAddsTheAddend) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(23);
  const std::int64_t tokens = 70, top_k = 2, experts = 4, pairs = tokens * top_k, hidden = 64;
  auto perm = moe::DevicePermutation::create(0, pairs, experts);
  ASSERT_TRUE(perm.ok()) << perm.status().to_string();
  std::vector<int> ex = route(pairs, int(experts), Routing::kUniform, rng);
  const HostSort hs = host_sort(ex, int(experts));
  std::vector<float> rows(std::size_t(pairs * hidden)), add(std::size_t(tokens * hidden)), w(static_cast<std::size_t>(pairs));
  for (auto& v : rows) v = round_bf16(float(rng.uniform() * 2 - 1));
  for (auto& v : add) v = round_bf16(float(rng.uniform() * 2 - 1));
  for (auto& v : w) v = float(rng.uniform());
  DeviceBuffer d_ex(std::size_t(pairs) * 4), gs(std::size_t(experts) * 4), row_of(std::size_t(pairs) * 4),
      pair_of(std::size_t(pairs) * 4), bad(4), ws(perm->sort_workspace_bytes()), d_rows(rows.size() * 2),
      d_add(add.size() * 2), d_w(w.size() * 4), y(add.size() * 2);
  upload(d_ex, ex);
  upload(d_rows, from_f32(rows, DType::kBF16));
  upload(d_add, from_f32(add, DType::kBF16));
  upload(d_w, w);
  poison(y, add.size() * 2);
  const moe::DeviceSortBuffers sorted{gs.p, row_of.p, pair_of.p, bad.p};
  ASSERT_TRUE(perm->sort(d_ex.p, pairs, sorted, ws.p, gpu()->stream()).is_ok());
  Status st = perm->combine(d_rows.p, static_cast<const float*>(d_w.p), sorted, tokens, top_k, hidden, DType::kBF16,
                            false, y.p, gpu()->stream(), d_add.p);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  const auto got = as_f32(download<unsigned char>(y, add.size() * 2), DType::kBF16);
  double worst = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t c = 0; c < hidden; ++c) {
      double want = add[std::size_t(t * hidden + c)];
      for (std::int64_t j = 0; j < top_k; ++j) {
        const int r = hs.row_of[std::size_t(t * top_k + j)];
        want += double(w[std::size_t(t * top_k + j)]) * rows[std::size_t(r * hidden + c)];
      }
      worst = std::max(worst, std::abs(got[std::size_t(t * hidden + c)] - want) / (1.0 + std::abs(want)));
    }
  }
  EXPECT_LT(worst, 8e-3);
}

TEST(MoeDeviceOps, RouterBackwardMatchesTheHost) {
  REQUIRE_GPU();
  using workloads::RouterKind;
  workloads::SplitMix64 rng(29);
  const std::int64_t tokens = 201;
  for (const auto& rt : kRouterCases) {
    const std::string what = "router " + std::to_string(int(rt.kind)) + " experts " + std::to_string(rt.experts);
    auto ops = moe::DeviceMoeOps::create(0, rt.kind, rt.experts, rt.k, rt.scaling);
    ASSERT_TRUE(ops.ok()) << ops.status().to_string();
    const std::size_t n_logits = std::size_t(tokens * rt.experts), pairs = std::size_t(tokens * rt.k);
    std::vector<float> logits(n_logits), d_w(pairs), d_scale(pairs);
    for (auto& v : logits) v = float(rng.uniform() * 8 - 4);
    for (auto& v : d_w) v = float(rng.uniform() * 2 - 1);
    for (auto& v : d_scale) v = float(rng.uniform() * 2 - 1);
    // the host's choice (the forward kernel matches it, see RoutersMatchTheHost)
    std::vector<std::int32_t> chosen(pairs);
    std::vector<float> weights(pairs), scale(static_cast<std::size_t>(tokens));
    std::vector<double> scratch(static_cast<std::size_t>(rt.experts));
    for (std::int64_t t = 0; t < tokens; ++t) {
      moe::route_token(rt.kind, logits.data() + t * rt.experts, nullptr, rt.experts, rt.k, rt.scaling,
                       {chosen.data() + t * rt.k, weights.data() + t * rt.k, scale.data() + t}, scratch.data());
    }
    DeviceBuffer d_logits(n_logits * 4), d_ex(pairs * 4), dd_w(pairs * 4), dd_scale(pairs * 4), out(n_logits * 2);
    upload(d_logits, logits);
    upload(d_ex, chosen);
    upload(dd_w, d_w);
    upload(dd_scale, d_scale);
    poison(out, n_logits * 2);
    Status st = ops->route_backward(static_cast<const float*>(d_logits.p), d_ex.p, static_cast<const float*>(dd_w.p),
                                    static_cast<const float*>(dd_scale.p), tokens, out.p, gpu()->stream());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto got = as_f32(download<unsigned char>(out, n_logits * 2), DType::kBF16);
    std::vector<float> want(static_cast<std::size_t>(rt.experts));
    double worst = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      float ds = 0;
      for (std::int64_t j = 0; j < rt.k; ++j) ds += d_scale[std::size_t(t * rt.k + j)];
      moe::route_token_backward(rt.kind, logits.data() + t * rt.experts, rt.experts, rt.k, rt.scaling,
                                chosen.data() + t * rt.k, d_w.data() + t * rt.k, ds, want.data(), scratch.data());
      for (std::int64_t e = 0; e < rt.experts; ++e) {
        const double g = got[std::size_t(t * rt.experts + e)], w = want[std::size_t(e)];
        if (w == 0) EXPECT_EQ(g, 0.0) << what << " token " << t << " expert " << e;
        worst = std::max(worst, std::abs(g - w) / (1e-3 + std::abs(w)));
      }
    }
    EXPECT_LT(worst, 8e-3) << what;  // bf16 output
  }
}

TEST(MoeDeviceOps, GatedActivationBackwardAndAccumulateMatchTheHost) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(31);
  auto ops = moe::DeviceMoeOps::create(0, workloads::RouterKind::kSoftmaxTopK, 8, 2, 1.0);
  ASSERT_TRUE(ops.ok()) << ops.status().to_string();
  for (moe::GatedActivation a : kActivations) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (std::int64_t ffn : {std::int64_t(96), std::int64_t(13)}) {
        const std::int64_t rows = 131;
        std::vector<float> up(std::size_t(rows * 2 * ffn)), d_act(std::size_t(rows * ffn));
        for (auto& v : up) v = float(rng.uniform() * 6 - 3);
        for (auto& v : d_act) v = float(rng.uniform() * 2 - 1);
        const auto upb = from_f32(up, dt), dab = from_f32(d_act, dt);
        const auto upr = as_f32(upb, dt), dar = as_f32(dab, dt);
        std::vector<float> want(up.size());
        moe::gated_activation_backward(a, upr.data(), dar.data(), rows, ffn, want.data());
        const std::size_t out_bytes = want.size() * dtype_size(dt);
        DeviceBuffer d_up(upb.size()), d_da(dab.size()), d_out(out_bytes);
        upload(d_up, upb);
        upload(d_da, dab);
        poison(d_out, out_bytes);
        Status st = ops->glu_backward(a, d_up.p, d_da.p, rows, ffn, dt, d_out.p, gpu()->stream());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        const auto got = as_f32(download<unsigned char>(d_out, out_bytes), dt);
        double worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i)
          worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
        EXPECT_LT(worst, dt == DType::kF32 ? 1e-5 : 8e-3) << moe::activation_name(a) << " " << dtype_name(dt) << " ffn " << ffn;

        // y += x over the same buffers
        st = ops->accumulate(d_out.p, d_up.p, std::int64_t(want.size()), dt, gpu()->stream());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        const auto sum = as_f32(download<unsigned char>(d_out, out_bytes), dt);
        worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
          const double w = double(got[i]) + upr[i];
          worst = std::max(worst, std::abs(sum[i] - w) / (1.0 + std::abs(w)));
        }
        EXPECT_LT(worst, dt == DType::kF32 ? 1e-6 : 8e-3) << "accumulate " << dtype_name(dt) << " ffn " << ffn;
      }
    }
  }
  EXPECT_FALSE(
      ops->glu_backward(moe::GatedActivation::kGeGLU, nullptr, nullptr, 4, 4, DType::kF32, nullptr, nullptr).is_ok());
  EXPECT_FALSE(ops->accumulate(nullptr, nullptr, 4, DType::kF16, nullptr).is_ok());
}

// The weighted backward (the layer's path when its down projection's data gradient reads dy through
// the token index): d_up is the backward of w[pair] * g, and d_weights[pair] = act . g with act
// rounded to the rows' type; rows of pair -1 get zeros and no dot. Pairs are a shuffled order with
// a few rows unowned, rows long enough for several pieces per lane and rows of an odd width.
TEST(MoeDeviceOps, WeightedGatedActivationBackwardMatchesTheHost) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(37);
  auto ops = moe::DeviceMoeOps::create(0, workloads::RouterKind::kSoftmaxTopK, 8, 2, 1.0);
  ASSERT_TRUE(ops.ok()) << ops.status().to_string();
  for (moe::GatedActivation a : kActivations) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (std::int64_t ffn : {std::int64_t(768), std::int64_t(13)}) {
        const std::int64_t rows = 203, pairs = rows;
        std::vector<int> pair_of(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r) pair_of[std::size_t(r)] = int((r * 37) % rows);
        for (std::int64_t r = rows - 5; r < rows; ++r) pair_of[std::size_t(r)] = -1;  // rows no pair owns
        std::vector<float> up(std::size_t(rows * 2 * ffn)), g(std::size_t(rows * ffn)), w(static_cast<std::size_t>(pairs));
        for (auto& v : up) v = float(rng.uniform() * 6 - 3);
        for (auto& v : g) v = float(rng.uniform() * 2 - 1);
        for (auto& v : w) v = float(0.05 + rng.uniform());
        const auto upb = from_f32(up, dt), gb = from_f32(g, dt);
        const auto upr = as_f32(upb, dt), gr = as_f32(gb, dt);
        std::vector<float> act(std::size_t(rows * ffn)), weighted(gr.size()), want(up.size());
        moe::gated_activation(a, upr.data(), rows, ffn, act.data());
        std::vector<double> want_dots(std::size_t(pairs), -7.0);  // pairs without a row: not written
        for (std::int64_t r = 0; r < rows; ++r) {
          const int p = pair_of[std::size_t(r)];
          double dot = 0;
          for (std::int64_t c = 0; c < ffn; ++c) {
            const std::size_t i = std::size_t(r * ffn + c);
            const float stored = dt == DType::kF32 ? act[i] : to_f32(to_bf16(act[i]));
            dot += double(stored) * gr[i];
            weighted[i] = p >= 0 ? w[std::size_t(p)] * gr[i] : 0.0f;
          }
          if (p >= 0) want_dots[std::size_t(p)] = dot;
        }
        moe::gated_activation_backward(a, upr.data(), weighted.data(), rows, ffn, want.data());
        const std::size_t out_bytes = want.size() * dtype_size(dt);
        DeviceBuffer d_up(upb.size()), d_g(gb.size()), d_out(out_bytes), d_pairs(pair_of.size() * 4),
            d_w(w.size() * 4), d_dots(w.size() * 4);
        upload(d_up, upb);
        upload(d_g, gb);
        upload(d_pairs, pair_of);
        upload(d_w, w);
        poison(d_out, out_bytes);
        upload(d_dots, std::vector<float>(w.size(), -7.0f));
        Status st = ops->glu_backward_weighted(a, d_up.p, d_g.p, static_cast<const int*>(d_pairs.p),
                                               static_cast<const float*>(d_w.p), rows, ffn, dt, d_out.p,
                                               static_cast<float*>(d_dots.p), gpu()->stream());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        const std::string what = std::string(moe::activation_name(a)) + " " + std::string(dtype_name(dt)) + " ffn " + std::to_string(ffn);
        const auto got = as_f32(download<unsigned char>(d_out, out_bytes), dt);
        double worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i)
          worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
        EXPECT_LT(worst, dt == DType::kF32 ? 1e-5 : 8e-3) << what;
        for (std::int64_t r = rows - 5; r < rows; ++r) {
          for (std::int64_t c = 0; c < 2 * ffn; ++c) ASSERT_EQ(got[std::size_t(r * 2 * ffn + c)], 0.0f) << what << " row " << r;
        }
        const auto dots = download<float>(d_dots, w.size());
        worst = 0;
        for (std::size_t p = 0; p < w.size(); ++p)
          worst = std::max(worst, std::abs(double(dots[p]) - want_dots[p]) / (1.0 + std::abs(want_dots[p])));
        // activations of one evaluation against the host's (the same up to fast-math's exp)
        EXPECT_LT(worst, dt == DType::kF32 ? 1e-4 : 2e-2) << what << " dots";
      }
    }
  }
  EXPECT_FALSE(ops->glu_backward_weighted(moe::GatedActivation::kSwiGLU, nullptr, nullptr, nullptr, nullptr, 4, 4,
                                          DType::kF32, nullptr, nullptr, nullptr)
                   .is_ok());
}

TEST(MoeDeviceFill, MatchesTheHostMirror) {
  REQUIRE_GPU();
  const std::int64_t count = 100003;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    DeviceBuffer d(std::size_t(count) * dtype_size(dt));
    poison(d, std::size_t(count) * dtype_size(dt));
    Status st = moe::fill_device_uniform(0, d.p, dt, count, 42, 0.125f, gpu()->stream());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto bytes = download<std::uint16_t>(d, std::size_t(count) * dtype_size(dt) / 2);
    int mismatched = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      const float want = moe::uniform_fill_value(42, std::uint64_t(i), 0.125f);
      float got = 0.0f;
      if (dt == DType::kF32) std::memcpy(&got, &bytes[std::size_t(2 * i)], 4);
      else got = dt == DType::kBF16 ? core::bf16_to_f32(bytes[std::size_t(i)]) : core::f16_to_f32(bytes[std::size_t(i)]);
      const float rounded = dt == DType::kF32    ? want
                            : dt == DType::kBF16 ? core::bf16_to_f32(core::f32_to_bf16(want))
                                                 : core::f16_to_f32(core::f32_to_f16(want));
      if (got != rounded) ++mismatched;
    }
    EXPECT_EQ(mismatched, 0) << dtype_name(dt);
  }
  EXPECT_FALSE(moe::fill_device_uniform(0, nullptr, DType::kF32, 4, 1, 1.0f, nullptr).is_ok());
  DeviceBuffer ints(64);
  const Status st = moe::fill_device_uniform(0, ints.p, DType::kI32, 4, 1, 1.0f, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
}

}  // namespace
}  // namespace ragdot
