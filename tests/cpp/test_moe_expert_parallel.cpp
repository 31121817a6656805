// The device MoE layer with expert parallelism (DeviceMoeOptions::expert_parallel in
// ragdot/moe_device.hpp) against the same layer with every expert on one GPU, forward.
//
// One rank runs in this process on GPU 0: the exchange is then the identity, the local experts'
// ragged dots are the same plans as the one-GPU layer's, and the outputs must be the same bytes.
// Several ranks run as one process per GPU (this program again, EpLayerRank.MatchesTheOneGpuLayer),
// with RAGDOT_EP_RANKS=N (N = 1 too: the launcher path on one GPU) or on every GPU when there are
// two or more: each rank holds E / W experts, routes its own tokens (its own x), and its output
// must match the one-GPU layer's on those tokens, which each rank also computes with every expert.
// Parameters come from fill_device_uniform with the same seeds on every rank, so all ranks hold
// the same model. Label "gpu": skipped where there is no GPU or no NCCL.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "rank_gpu.hpp"
#include "ragdot/moe_device.hpp"
#include "verify/ep_launch.hpp"

namespace ragdot {
namespace {

constexpr std::int64_t kShrink = 16;  // hidden and ffn of the presets divided by this
constexpr std::int64_t kTokens = 96;  // per rank

struct BothOutputs {
  std::vector<std::uint16_t> ep, one_gpu;  // [T, H] bf16 each
};

// On `comm`'s GPU: the preset's whole parameters, x for this rank, the layer with every expert
// and the layer with this rank's experts over `comm`; both outputs of one forward.
BothOutputs forward_both(ep::Communicator& comm, const std::string& preset,
                         moe::GatedActivation activation = moe::GatedActivation::kSwiGLU) {
  BothOutputs out;
  auto config = moe::preset_config(preset, kShrink);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  if (!config.ok()) return out;
  config->activation = activation;
  const moe::MoeConfig& c = *config;
  const std::int64_t e = c.experts, h = c.hidden, f = c.ffn, s = c.shared_experts, t = kTokens;
  const int device = comm.device();
  RankGpu gpu(device);
  auto filled = [&](std::int64_t count, DType dt, std::uint32_t seed, float scale) {
    void* p = gpu.alloc(std::size_t(count) * dtype_size(dt));
    EXPECT_TRUE(moe::fill_device_uniform(device, p, dt, count, seed, scale, gpu.stream()).is_ok());
    return p;
  };
  moe::DeviceMoeParams whole;
  whole.router = filled(h * e, DType::kBF16, 1, 1.0f / std::sqrt(float(h)));
  whole.router_bias = static_cast<const float*>(filled(e, DType::kF32, 2, 0.1f));
  whole.w_up = filled(e * h * 2 * f, DType::kBF16, 3, 1.0f / std::sqrt(float(h)));
  whole.w_down = filled(e * f * h, DType::kBF16, 4, 1.0f / std::sqrt(float(f)));
  if (s > 0) {
    whole.shared_up = filled(s * h * 2 * f, DType::kBF16, 5, 1.0f / std::sqrt(float(h)));
    whole.shared_down = filled(s * f * h, DType::kBF16, 6, 1.0f / std::sqrt(float(f)));
  }
  const void* x = filled(t * h, DType::kBF16, 100 + std::uint32_t(comm.rank()), 1.0f);
  void* y_one = gpu.alloc(std::size_t(t * h) * 2, 0x7f);  // poisoned: 0x7f7f is a huge bf16
  void* y_ep = gpu.alloc(std::size_t(t * h) * 2, 0x7f);

  moe::DeviceMoeOptions one_gpu;
  one_gpu.device = device;
  moe::DeviceMoeOptions spread = one_gpu;
  spread.expert_parallel = &comm;
  auto reference = moe::DeviceMoeLayer::create(c, t, one_gpu);
  auto layer = moe::DeviceMoeLayer::create(c, t, spread);
  EXPECT_TRUE(reference.ok()) << reference.status().to_string();
  EXPECT_TRUE(layer.ok()) << layer.status().to_string();
  if (!reference.ok() || !layer.ok()) return out;
  EXPECT_FALSE(layer->graph_safe());

  // this rank's experts: [rank E / W, (rank + 1) E / W), contiguous in both weight stacks
  const std::int64_t local = e / comm.world_size(), first = comm.rank() * local;
  moe::DeviceMoeParams mine = whole;
  mine.w_up = static_cast<const char*>(whole.w_up) + std::size_t(first * h * 2 * f) * 2;
  mine.w_down = static_cast<const char*>(whole.w_down) + std::size_t(first * f * h) * 2;
  EXPECT_TRUE(reference->forward(x, whole, y_one, gpu.stream()).is_ok());
  const Status st = layer->forward(x, mine, y_ep, gpu.stream());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  out.one_gpu = gpu.download<std::uint16_t>(y_one, std::size_t(t * h));
  out.ep = gpu.download<std::uint16_t>(y_ep, std::size_t(t * h));

  // forward only: backward says so and writes nothing
  void* dx = gpu.alloc(std::size_t(t * h) * 2, 0x7f);
  moe::DeviceMoeGrads grads;
  grads.d_x = dx;
  EXPECT_EQ(layer->backward(x, mine, y_ep, grads, gpu.stream()).code(), StatusCode::kUnsupported);
  const auto untouched = gpu.download<std::uint16_t>(dx, std::size_t(t * h));
  EXPECT_EQ(untouched[0], 0x7f7f);
  return out;
}

double relative_error(const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = core::bf16_to_f32(got[i]), w = core::bf16_to_f32(want[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - w) * (g - w);
    den += w * w;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

const char* const kPresets[] = {"mixtral-8x7b", "deepseek-v3", "llama4-scout", "qwen3-30b-a3b"};

TEST(EpLayerOneRank, SameBytesAsTheOneGpuLayer) {
  REQUIRE_GPU_AND_NCCL();
  auto comm = one_rank();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  for (const char* preset : kPresets) {
    const BothOutputs y = forward_both(*comm, preset);
    ASSERT_EQ(y.ep.size(), y.one_gpu.size()) << preset;
    EXPECT_TRUE(y.ep == y.one_gpu) << preset << ": relative error " << relative_error(y.ep, y.one_gpu);
  }
  // the experts' activation on the rows a rank receives is the layer's (GeGLU here)
  const BothOutputs y = forward_both(*comm, "qwen3-30b-a3b", moe::GatedActivation::kGeGLU);
  ASSERT_EQ(y.ep.size(), y.one_gpu.size());
  EXPECT_TRUE(y.ep == y.one_gpu) << "qwen3-30b-a3b geglu: relative error " << relative_error(y.ep, y.one_gpu);
}

TEST(EpLayerOneRank, RejectsWhatItCannotRun) {
  REQUIRE_GPU_AND_NCCL();
  auto comm = one_rank();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  auto c = moe::preset_config("mixtral-8x7b", kShrink);
  ASSERT_TRUE(c.ok());
  moe::DeviceMoeOptions o;
  o.expert_parallel = &*comm;
  o.expert_backend = "padded";
  EXPECT_EQ(moe::DeviceMoeLayer::create(*c, kTokens, o).status().code(), StatusCode::kInvalidArgument);
  o.expert_backend = "cuda";
  o.device = comm->device() + 1;  // a GPU the communicator is not on (or none at all)
  EXPECT_FALSE(moe::DeviceMoeLayer::create(*c, kTokens, o).ok());
}

// One rank of the multi-process test: runs only when the launcher started it.
TEST(EpLayerRank, MatchesTheOneGpuLayer) {
  const char* marker_dir = std::getenv("RAGDOT_EP_TEST_MARKERS");
  if (!marker_dir) GTEST_SKIP() << "started by EpLayerRanks.MatchTheOneGpuLayer";
  auto b = ep::bootstrap_from_env();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  auto comm = ep::Communicator::create(*b);
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  for (const char* preset : kPresets) {
    if (moe::preset_config(preset, kShrink)->experts % comm->world_size() != 0) continue;
    const BothOutputs y = forward_both(*comm, preset);
    ASSERT_EQ(y.ep.size(), y.one_gpu.size()) << preset;
    // the same products in the same order per row; only the expert GEMMs' plans (sized for the
    // rows a rank may receive) can differ from the one-GPU layer's
    EXPECT_LT(relative_error(y.ep, y.one_gpu), 2e-3) << preset << " on rank " << comm->rank();
  }
  mark_rank_passed(marker_dir, comm->rank());
}

TEST(EpLayerRanks, MatchTheOneGpuLayer) {
  REQUIRE_GPU_AND_NCCL();
  expect_every_rank_passes("EpLayerRank.MatchesTheOneGpuLayer", 300);
}

}  // namespace
}  // namespace ragdot
