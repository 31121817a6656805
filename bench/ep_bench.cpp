// The NCCL expert-parallel transport (ragdot/ep_transport.hpp) timed on 1 to N GPUs, one process
// per GPU: per step, the counts exchange with its plan (the one host sync), the dispatch of every
// (token, slot) row to its expert's rank and the combine back, for a preset's hidden size in bf16,
// top-k and experts, with uniform or skewed routing, received by expert (one message per rank and
// expert) and by source rank (one per rank); then rows through a padded plan (no host sync,
// fixed slots). Each rank prints one line: the bytes it sent and received, median milliseconds
// per phase and the tokens per second of the whole exchange over all ranks.
//
// --layer times the whole expert-parallel MoE layer forward instead (DeviceMoeOptions::
// expert_parallel: router, sort, counts, dispatch, the rank's experts, combine back, combine),
// each rank holding E / W experts of the full-size preset and routing its own tokens; the tokens
// per second are those of all ranks together. With one rank it also times the one-GPU layer
// (every expert, no exchange) on the same tokens: the 1-GPU baseline of the scaling.
//
//   ep_bench [--ranks 1,2,4,8] [--preset deepseek-v3] [--tokens-per-rank 4096] [--skew 1.2] [--reps 20]
//            [--capacity-factor 1.0] [--layer]
//
// With no --ranks: 1, 2, 4, ... up to the GPUs present, each count started as one process per GPU
// (NCCL_NVLS_ENABLE=0 in every rank). A process started with RAGDOT_EP_RANK and the rest of the
// bootstrap in its environment runs as that one rank instead (any launcher).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "ragdot/ep_transport.hpp"
#include "ragdot/moe_device.hpp"
#include "verify/ep_launch.hpp"

namespace {

using namespace ragdot;

struct Options {
  std::string preset = "deepseek-v3";
  std::vector<int> ranks;
  long tokens_per_rank = 4096;
  double skew = 0.0;
  double capacity_factor = 1.0;  // padded slots: this times a rank's rows / ranks
  int reps = 20;
  bool layer = false;  // time the expert-parallel layer forward instead of the bare exchange
};

struct Shape {
  long hidden, experts, top_k;
};

bool shape_of(const std::string& preset, Shape& s) {
  if (preset == "mixtral-8x7b") s = {4096, 8, 2};
  else if (preset == "deepseek-v3") s = {7168, 256, 8};
  else if (preset == "llama4-scout") s = {5120, 16, 1};
  else if (preset == "qwen3-30b-a3b") s = {2048, 128, 8};
  else return false;
  return true;
}

#define CHECK_OK(expr)                                                                          \
  do {                                                                                          \
    const ::ragdot::Status s_ = (expr);                                                         \
    if (!s_.is_ok()) {                                                                          \
      std::fprintf(stderr, "ep_bench rank %s: %s\n", std::getenv("RAGDOT_EP_RANK"), s_.to_string().c_str()); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)
#define CHECK_CU(call) CHECK_OK(::ragdot::cuda::cu_status((call), #call))

// Rows per expert on one rank: top-k distinct experts per token, Zipf-like when skewed.
std::vector<std::int32_t> route(long tokens, const Shape& s, double skew, int rank) {
  std::mt19937_64 rng(std::uint64_t(1234 + rank));
  std::vector<double> w(std::size_t(s.experts));
  for (long e = 0; e < s.experts; ++e) w[std::size_t(e)] = std::pow(double(e + 1), -skew);
  std::vector<std::int32_t> counts(std::size_t(s.experts), 0);
  for (long t = 0; t < tokens; ++t) {
    std::vector<double> left = w;
    for (long j = 0; j < s.top_k; ++j) {
      std::discrete_distribution<long> pick(left.begin(), left.end());
      const long e = pick(rng);
      ++counts[std::size_t(e)];
      left[std::size_t(e)] = 0;
    }
  }
  return counts;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The rank's GPU for the scope: its context current and a stream on it.
struct RankStream {
  explicit RankStream(int ordinal) {
    auto dev = cuda::device(ordinal);
    status = dev.status();
    if (!status.is_ok()) return;
    ctx.emplace((*dev)->context);
    status = cuda::cu_status(cuda::driver()->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~RankStream() {
    if (stream) cuda::driver()->cuStreamDestroy(stream);
  }
  std::optional<cuda::ScopedContext> ctx;
  CUstream stream = nullptr;
  ragdot::Status status;
};

// This process's rank of the communicator its environment describes; the experts must split
// evenly over the ranks.
Result<ep::Communicator> join(std::int64_t experts) {
  RAGDOT_ASSIGN_OR_RETURN(ep::Bootstrap b, ep::bootstrap_from_env());
  RAGDOT_ASSIGN_OR_RETURN(ep::Communicator comm, ep::Communicator::create(b));
  if (experts % comm.world_size()) {
    return invalid_argument(std::to_string(experts) + " experts do not split over " +
                            std::to_string(comm.world_size()) + " ranks");
  }
  return comm;
}

// This process's rank: its communicator, and its GPU with a stream.
struct Rank {
  explicit Rank(std::int64_t experts) {
    auto joined = join(experts);
    status = joined.status();
    if (!status.is_ok()) return;
    comm.emplace(std::move(*joined));
    gpu.emplace(comm->device());
    status = gpu->status;
  }
  std::optional<ep::Communicator> comm;
  std::optional<RankStream> gpu;
  ragdot::Status status;
};

int run_rank(const Options& o) {
  Shape s{};
  shape_of(o.preset, s);
  Rank rank(s.experts);
  CHECK_OK(rank.status);
  ep::Communicator* comm = &*rank.comm;
  const int world = comm->world_size(), me = comm->rank();
  const auto* d = cuda::driver();
  CUstream stream = rank.gpu->stream;

  const std::vector<std::int32_t> counts = route(o.tokens_per_rank, s, o.skew, me);
  const long pairs = o.tokens_per_rank * s.top_k;
  const std::int64_t row_bytes = s.hidden * 2;  // bf16 rows
  // padded slots: capacity_factor times an even share of a rank's rows for each rank
  const ep::ExchangePlan padded =
      ep::ExchangePlan::padded(world, std::int64_t(std::ceil(o.capacity_factor * double(pairs) / world)));
  // the worst case a rank can receive: every pair of every rank
  const long send_rows = std::max<long>(pairs, long(padded.send_capacity));
  const long recv_rows = std::max<long>(pairs * world, long(padded.recv_capacity));
  CUdeviceptr counts_d = 0, recv_counts_d = 0, send = 0, recv = 0, back = 0;
  CHECK_CU(d->cuMemAlloc(&counts_d, counts.size() * 4));
  CHECK_CU(d->cuMemAlloc(&recv_counts_d, counts.size() * 4));
  CHECK_CU(d->cuMemAlloc(&send, std::size_t(send_rows * row_bytes)));
  CHECK_CU(d->cuMemAlloc(&recv, std::size_t(recv_rows * row_bytes)));
  CHECK_CU(d->cuMemAlloc(&back, std::size_t(pairs * row_bytes)));
  CHECK_CU(d->cuMemcpyHtoD(counts_d, counts.data(), counts.size() * 4));
  CHECK_CU(d->cuMemsetD8Async(send, 0x3c, std::size_t(send_rows * row_bytes), stream));
  auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
  CUevent ev[4];
  for (auto& e : ev) CHECK_CU(d->cuEventCreate(&e, CU_EVENT_DEFAULT));

  // one step: counts, plan (the host sync), dispatch, combine; medians of each phase
  struct Times {
    double plan = 0, dispatch = 0, combine = 0, step = 0;
  };
  ep::ExchangePlan plan;
  auto time_steps = [&](ep::Layout layout, Times& out) -> ragdot::Status {
    std::vector<double> t_plan, t_dispatch, t_combine, t_step;
    for (int it = 0; it < o.reps + 3; ++it) {
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[0], stream), "cuEventRecord");
      RAGDOT_RETURN_IF_ERROR(comm->exchange_counts(ptr(counts_d), ptr(recv_counts_d), s.experts, stream));
      auto p = comm->plan(ptr(counts_d), ptr(recv_counts_d), s.experts, stream, layout);
      RAGDOT_RETURN_IF_ERROR(p.status());
      plan = *p;
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[1], stream), "cuEventRecord");
      RAGDOT_RETURN_IF_ERROR(comm->dispatch(plan, ptr(send), ptr(recv), row_bytes, stream));
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[2], stream), "cuEventRecord");
      RAGDOT_RETURN_IF_ERROR(comm->combine(plan, ptr(recv), ptr(back), row_bytes, stream));
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[3], stream), "cuEventRecord");
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventSynchronize(ev[3]), "cuEventSynchronize");
      if (it < 3) continue;
      float ms[3] = {}, all = 0;
      for (int i = 0; i < 3; ++i) {
        RAGDOT_CU_RETURN_IF_ERROR(d->cuEventElapsedTime(&ms[i], ev[i], ev[i + 1]), "cuEventElapsedTime");
      }
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventElapsedTime(&all, ev[0], ev[3]), "cuEventElapsedTime");
      t_plan.push_back(ms[0]);
      t_dispatch.push_back(ms[1]);
      t_combine.push_back(ms[2]);
      t_step.push_back(all);
    }
    out = {median(t_plan), median(t_dispatch), median(t_combine), median(t_step)};
    return ragdot::Status::ok();
  };
  Times by_expert, by_source;
  CHECK_OK(time_steps(ep::Layout::kByExpert, by_expert));
  CHECK_OK(time_steps(ep::Layout::kBySource, by_source));
  // padded: the same kind of step without counts or host sync (slots sized up front; rows past
  // a slot's capacity would be dropped by the layer that packs them)
  std::vector<double> t_padded;
  for (int it = 0; it < o.reps + 3; ++it) {
    CHECK_CU(d->cuEventRecord(ev[0], stream));
    CHECK_OK(comm->dispatch(padded, ptr(send), ptr(recv), row_bytes, stream));
    CHECK_OK(comm->combine(padded, ptr(recv), ptr(send), row_bytes, stream));
    CHECK_CU(d->cuEventRecord(ev[1], stream));
    CHECK_CU(d->cuEventSynchronize(ev[1]));
    float ms = 0;
    CHECK_CU(d->cuEventElapsedTime(&ms, ev[0], ev[1]));
    if (it >= 3) t_padded.push_back(ms);
  }
  const double sent_gb = double(plan.send_capacity) * double(row_bytes) * 1e-9;
  const double recv_gb = double(plan.recv_capacity) * double(row_bytes) * 1e-9;
  const double tokens = double(o.tokens_per_rank) * world;
  std::printf("%s ranks=%d rank=%d tokens/rank=%ld H=%ld E=%ld k=%ld skew=%.2f | sent %.3f GB recv %.3f GB | "
              "by expert: plan %.3f dispatch %.3f combine %.3f step %.3f ms, %.0f tok/s | by source: dispatch %.3f "
              "combine %.3f step %.3f ms, %.0f tok/s | padded slots of %lld rows: dispatch+combine %.3f ms\n",
              o.preset.c_str(), world, me, o.tokens_per_rank, s.hidden, s.experts, s.top_k, o.skew, sent_gb, recv_gb,
              by_expert.plan, by_expert.dispatch, by_expert.combine, by_expert.step, tokens / (by_expert.step * 1e-3),
              by_source.dispatch, by_source.combine, by_source.step, tokens / (by_source.step * 1e-3),
              static_cast<long long>(padded.send_rows[0]), median(t_padded));
  std::fflush(stdout);
  for (auto& e : ev) d->cuEventDestroy(e);
  for (CUdeviceptr p : {counts_d, recv_counts_d, send, recv, back}) d->cuMemFree(p);
  return 0;
}

// The expert-parallel layer forward on this rank: the preset at full size, E / W experts here.
int run_layer_rank(const Options& o) {
  auto config = moe::preset_config(o.preset);
  CHECK_OK(config.status());
  const moe::MoeConfig& c = *config;
  Rank rank(c.experts);
  CHECK_OK(rank.status);
  ep::Communicator* comm = &*rank.comm;
  const int world = comm->world_size(), me = comm->rank();
  const auto* d = cuda::driver();
  CUstream stream = rank.gpu->stream;
  std::vector<CUdeviceptr> allocs;
  const int device = comm->device();
  auto filled = [&](std::int64_t count, DType dt, std::uint32_t seed, float scale) -> void* {
    CUdeviceptr p = 0;
    if (d->cuMemAlloc(&p, std::size_t(std::max<std::int64_t>(count, 1)) * dtype_size(dt)) != CUDA_SUCCESS) return nullptr;
    allocs.push_back(p);
    if (!moe::fill_device_uniform(device, reinterpret_cast<void*>(p), dt, count, seed, scale, stream).is_ok()) {
      return nullptr;
    }
    return reinterpret_cast<void*>(p);
  };
  const std::int64_t h = c.hidden, f = c.ffn, t = o.tokens_per_rank, s = c.shared_experts;
  // every rank holds the same model (same seeds); the one-GPU baseline needs every expert
  const std::int64_t held = world == 1 ? c.experts : c.experts / world;
  moe::DeviceMoeParams params;
  params.router = filled(h * c.experts, DType::kBF16, 1, 1.0f / std::sqrt(float(h)));
  params.router_bias = static_cast<const float*>(filled(c.experts, DType::kF32, 2, 0.1f));
  params.w_up = filled(held * h * 2 * f, DType::kBF16, 3, 1.0f / std::sqrt(float(h)));
  params.w_down = filled(held * f * h, DType::kBF16, 4, 1.0f / std::sqrt(float(f)));
  if (s > 0) {
    params.shared_up = filled(s * h * 2 * f, DType::kBF16, 5, 1.0f / std::sqrt(float(h)));
    params.shared_down = filled(s * f * h, DType::kBF16, 6, 1.0f / std::sqrt(float(f)));
  }
  const void* x = filled(t * h, DType::kBF16, 100 + std::uint32_t(me), 1.0f);
  void* y = filled(t * h, DType::kBF16, 7, 1.0f);
  if (!params.router || !params.w_up || !params.w_down || !x || !y) {
    std::fprintf(stderr, "ep_bench rank %d: out of device memory for %s\n", me, o.preset.c_str());
    return 1;
  }
  CUevent ev[2];
  for (auto& e : ev) CHECK_CU(d->cuEventCreate(&e, CU_EVENT_DEFAULT));
  // median milliseconds of one forward of `layer` (which waits for the host once per call with EP)
  auto time_forward = [&](moe::DeviceMoeLayer& layer, double& ms_out) -> ragdot::Status {
    std::vector<double> ms;
    for (int it = 0; it < o.reps + 3; ++it) {
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[0], stream), "cuEventRecord");
      RAGDOT_RETURN_IF_ERROR(layer.forward(x, params, y, stream));
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(ev[1], stream), "cuEventRecord");
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventSynchronize(ev[1]), "cuEventSynchronize");
      float one = 0;
      RAGDOT_CU_RETURN_IF_ERROR(d->cuEventElapsedTime(&one, ev[0], ev[1]), "cuEventElapsedTime");
      if (it >= 3) ms.push_back(one);
    }
    ms_out = median(ms);
    return ragdot::Status::ok();
  };
  moe::DeviceMoeOptions options;
  options.device = device;
  double one_gpu_ms = 0, ep_ms = 0;
  if (world == 1) {
    auto plain = moe::DeviceMoeLayer::create(c, t, options);
    CHECK_OK(plain.status());
    CHECK_OK(time_forward(*plain, one_gpu_ms));
  }
  options.expert_parallel = comm;
  auto layer = moe::DeviceMoeLayer::create(c, t, options);
  CHECK_OK(layer.status());
  CHECK_OK(time_forward(*layer, ep_ms));
  const double tokens = double(t) * world;
  std::printf("layer %s ranks=%d rank=%d tokens/rank=%lld experts/rank=%lld | forward %.3f ms, %.0f tok/s over all "
              "ranks",
              o.preset.c_str(), world, me, static_cast<long long>(t), static_cast<long long>(c.experts / world), ep_ms,
              tokens / (ep_ms * 1e-3));
  if (world == 1) {
    std::printf(" | one-GPU layer (no exchange) %.3f ms, %.0f tok/s", one_gpu_ms, tokens / (one_gpu_ms * 1e-3));
  }
  std::printf("\n");
  std::fflush(stdout);
  for (auto& e : ev) d->cuEventDestroy(e);
  for (CUdeviceptr p : allocs) d->cuMemFree(p);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: ep_bench [--ranks 1,2,4,8] [--preset mixtral-8x7b|deepseek-v3|llama4-scout|qwen3-30b-a3b] "
               "[--tokens-per-rank N] [--skew S] [--reps N] [--capacity-factor F] [--layer]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    if (a == "--preset" && has) o.preset = args[++i];
    else if (a == "--tokens-per-rank" && has) o.tokens_per_rank = std::atol(args[++i].c_str());
    else if (a == "--skew" && has) o.skew = std::atof(args[++i].c_str());
    else if (a == "--reps" && has) o.reps = std::max(1, std::atoi(args[++i].c_str()));
    else if (a == "--capacity-factor" && has) o.capacity_factor = std::atof(args[++i].c_str());
    else if (a == "--layer") o.layer = true;
    else if (a == "--ranks" && has) {
      const std::string list = args[++i];
      for (std::size_t at = 0;;) {
        const std::size_t comma = list.find(',', at);
        o.ranks.push_back(std::atoi(list.substr(at, comma - at).c_str()));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else return usage();
  }
  Shape s{};
  if (!shape_of(o.preset, s) || o.tokens_per_rank < 1) return usage();
  if (std::getenv("RAGDOT_EP_RANK")) return o.layer ? run_layer_rank(o) : run_rank(o);  // a rank started below

  std::string why;
  const int gpus = cuda::device_count(&why);
  if (gpus < 1) {
    std::fprintf(stderr, "ep_bench: no GPU (%s)\n", why.c_str());
    return 1;
  }
  if (o.ranks.empty()) {
    for (int n = 1; n <= gpus; n *= 2) o.ranks.push_back(n);
    if (o.ranks.back() != gpus) o.ranks.push_back(gpus);
  }
  int failed = 0;
  for (int n : o.ranks) {
    if (n < 1 || n > gpus) {
      std::fprintf(stderr, "ep_bench: %d ranks skipped (%d GPUs)\n", n, gpus);
      continue;
    }
    verify::RankLaunch launch;
    launch.argv.push_back("/proc/self/exe");
    launch.argv.insert(launch.argv.end(), args.begin(), args.end());
    launch.world_size = n;
    launch.gpus = gpus;
    launch.id_file = "/tmp/ragdot_ep_bench_id_" + std::to_string(::getpid());
    launch.timeout_s = 600;
    auto st = verify::run_ranks(launch);
    if (!st.ok()) {
      std::fprintf(stderr, "ep_bench: %s\n", st.status().to_string().c_str());
      return 1;
    }
    for (int r = 0; r < n; ++r) {
      if ((*st)[std::size_t(r)] != 0) {
        std::fprintf(stderr, "ep_bench: %d ranks: rank %d exited with %d\n", n, r, (*st)[std::size_t(r)]);
        failed = 1;
      }
    }
    std::remove(launch.id_file.c_str());
  }
  return failed;
}
