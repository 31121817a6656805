// GPU benchmark, ragdot side: the cuda backend (and beside it ragdot's cublas backend and GPU
// padded baseline, with their host bridge timed apart) on the MoE shapes of WORKLOADS.md (prefill and
// decode, uniform and skewed routing, forward and weight gradient), beside the cuBLAS peers
// measured in the same process: the dense roof (one GEMM of the same FLOPs), the per-expert loop
// and cublasGemmGroupedBatchedEx. Writes JSON with every case's group sizes so that the Python
// peers (bench/gpu_peers.py) time exactly the same problems.
//
//   gpu_bench --json FILE [--reps N] [--only SUBSTRING] [--skew S] [--quick] [--sweep "bn=128;bn=256,stages=3"] [--no-peers]
//             [--hold SECONDS]
//
// --sweep times the cuda backend again under each RAGDOT_CUDA_VARIANT override (';'-separated;
// "measure" stands for a measured plan, PlanningEffort::kMeasure with the case's group sizes),
// in the same process and on the same operands, then the planner's own choice once more, so that
// the A/B is not confounded by clocks drifting between runs. --no-peers leaves out everything but
// ragdot's cuda backend and the dense roof (for sweeps and profiles). --skew S keeps only the cases
// of that router skew (0 or 1.2), so that a profiler's launch count picks one case's kernels.
// --hold S then runs ragdot's kernel (the planner's, or RAGDOT_CUDA_VARIANT's) and the dense roof
// back to back for S seconds each and records their wall-clock windows, for the board's power and
// clocks read from outside over those windows (scripts/gpu_power.sh, bench/gpu_power.py): in
// sustained runs a Hopper GPU sits at its power cap, and time then follows energy per operation.
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/kernel_cache.hpp"
#include "bench_cases.hpp"
#include "ragdot/ragdot.hpp"

namespace {

using namespace ragdot;
using bench::BenchCase;
using bench::bench_cases;
using bench::kRouterSeed;
const cuda::DriverApi* D = nullptr;

#define CU(call)                                                                    \
  do {                                                                              \
    CUresult r_ = (call);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                       \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                       \
                   cuda::cu_status(r_, #call).to_string().c_str());                 \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)
#define CUBLAS(call)                                                                \
  do {                                                                              \
    cublasStatus_t s_ = (call);                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "%s:%d: cuBLAS error %d in %s\n", __FILE__, __LINE__, int(s_), #call); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

struct DevBuf {
  CUdeviceptr p = 0;
  std::size_t bytes = 0;
  explicit DevBuf(std::size_t n) : bytes(n) { CU(D->cuMemAlloc(&p, std::max<std::size_t>(n, 16))); }
  ~DevBuf() { D->cuMemFree(p); }
  void* ptr() const { return reinterpret_cast<void*>(p); }
};

// Random bf16 in [-1, 1): a 32 MiB random block tiled over the buffer (never zeros).
void fill_bf16(DevBuf& b, std::uint64_t seed) {
  const std::size_t block = std::min<std::size_t>(b.bytes / 2, 16u << 20);
  std::vector<std::uint16_t> h(block);
  workloads::SplitMix64 rng(seed);
  for (auto& x : h) {
    float v = float(rng.uniform() * 2 - 1);
    if (v == 0) v = 0.25f;
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    x = std::uint16_t(u >> 16);
  }
  CU(D->cuMemcpyHtoD(b.p, h.data(), block * 2));
  for (std::size_t off = block * 2; off < b.bytes; off += block * 2)
    CU(D->cuMemcpyDtoD(b.p + off, b.p, std::min(block * 2, b.bytes - off)));
}

double wall_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Milliseconds of `reps` timed runs of `fn` after warm-up (at least 3 runs and `warm_ms`, so that
// clocks have settled), each bracketed by CUDA events.
template <class F>
std::vector<float> time_runs(CUstream s, int reps, F&& fn, double warm_ms = 150.0) {
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3 || wall_ms(warm_start) < warm_ms; ++i) {
    fn();
    if (i % 4 == 3) CU(D->cuStreamSynchronize(s));
  }
  CU(D->cuStreamSynchronize(s));
  std::vector<float> t;
  CUevent a, b;
  CU(D->cuEventCreate(&a, CU_EVENT_DEFAULT));
  CU(D->cuEventCreate(&b, CU_EVENT_DEFAULT));
  for (int i = 0; i < reps; ++i) {
    CU(D->cuEventRecord(a, s));
    fn();
    CU(D->cuEventRecord(b, s));
    CU(D->cuEventSynchronize(b));
    float ms = 0;
    CU(D->cuEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  D->cuEventDestroy(a);
  D->cuEventDestroy(b);
  return t;
}

double median(std::vector<float> t) {
  std::sort(t.begin(), t.end());
  return t.empty() ? -1.0 : t[t.size() / 2];
}

// Median milliseconds of `fn` over `reps` timed runs after warm-up, with CUDA events.
template <class F>
double time_ms(CUstream s, int reps, F&& fn) {
  return median(time_runs(s, reps, fn));
}

// Two methods (ragdot and the dense roof, or a sweep's override and the planner's kernel) timed in
// alternating rounds, each round warmed up, and each one's median over all its runs: the GPU's
// clocks drift by 10-30% over a case, and timing one method after the other would hand that drift
// to the ratio. The rounds go a b, b a, a b, b a: as the GPU heats up under the load, whichever
// runs second in a round runs slower (on an H100 that alone moved a ratio by 5-7%), and the
// mirrored order gives each method the first place equally often.
template <class F, class G>
std::pair<double, double> time_alternating(CUstream s, int reps, F&& a, G&& b, int rounds = 4) {
  std::vector<float> ta, tb;
  const int per_round = std::max(1, (reps + rounds - 1) / rounds);
  for (int r = 0; r < rounds; ++r) {
    const double warm = r == 0 ? 150.0 : 30.0;
    auto run_a = [&] { for (float x : time_runs(s, per_round, a, warm)) ta.push_back(x); };
    auto run_b = [&] { for (float x : time_runs(s, per_round, b, warm)) tb.push_back(x); };
    if (r % 2 == 0) run_a(), run_b();
    else run_b(), run_a();
  }
  return {median(ta), median(tb)};
}

// A kernel run back to back for a while, for the power and clocks read from outside over its
// wall-clock window (seconds since the epoch); ms: its mean time per run there.
struct Hold {
  double start = 0, end = 0, ms = -1;
};
// Runs `fn` back to back for a warm-up second, then for `seconds` timed: queued twenty at a time,
// so the GPU idles only for a launch's latency between batches, and the board's power and clocks
// settle where a sustained load holds them.
template <class F>
Hold hold_for(CUstream s, double seconds, F&& fn) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  auto batch = [&] {
    for (int i = 0; i < 20; ++i) fn();
    CU(D->cuStreamSynchronize(s));
  };
  for (const auto warm = clock::now(); since(warm) < 1.0;) batch();
  Hold h;
  h.start = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto t0 = clock::now();
  long runs = 0;
  do {
    batch();
    runs += 20;
  } while (since(t0) < seconds);
  const double elapsed = since(t0);
  h.end = h.start + elapsed;
  h.ms = elapsed * 1e3 / double(runs);
  return h;
}

// Another ragdot backend on the same operands: its execute time (CUDA events, as every timing here)
// and, for backends that bridge group sizes to the host, that bridge's host time measured apart
// (median over runs that each start on an idle stream, so no queued GEMM is waited for).
struct BackendTiming {
  double ms = -1, bridge_ms = -1;
  // with a baseline to alternate with (the sweep): the baseline's median over the same rounds
  double baseline_ms = -1;
  std::string variant, error;
};

// `unless_variant`: a plan of that variant is not timed (a sweep's override that leaves the
// planner's kernel as it is, e.g. a mode 2 key on a mode 1 case); its error says so.
// `baseline`: when given, timed in alternating rounds with this plan (time_alternating), so that the
// ratio of the two does not take the clocks' drift between them.
BackendTiming time_backend(const RaggedDot& op, const PlanOptions& po, ExecuteArgs args, CUstream s, int reps,
                           const std::string& unless_variant = "", const std::function<void()>& baseline = {}) {
  BackendTiming t;
  auto plan = make_plan(op, po);
  if (!plan.ok()) {
    t.error = plan.status().to_string();
    return t;
  }
  t.variant = plan->variant();
  // (the kernel and grid, not how the kernel was loaded: " jit=..." differs between two plans)
  auto kernel_of = [](const std::string& v) { return v.substr(0, v.find(" jit=")); };
  if (!unless_variant.empty() && kernel_of(t.variant) == kernel_of(unless_variant)) {
    t.error = "the planner's kernel (the override does not apply here): not timed again";
    return t;
  }
  DevBuf ws(plan->workspace_bytes());
  args.workspace = {ws.ptr(), plan->workspace_bytes(), MemorySpace::kDevice};
  Status st;
  auto run = [&] {
    if (st.is_ok()) st = plan->execute(args);
  };
  if (baseline) std::tie(t.ms, t.baseline_ms) = time_alternating(s, reps, run, baseline);
  else t.ms = time_ms(s, reps, run);
  if (!st.is_ok()) {
    t.error = st.to_string();
    t.ms = -1;
    return t;
  }
  if (!plan->needs_host_sync()) return t;
  std::vector<double> bridge;
  ExecuteReport report;
  args.report = &report;
  for (int i = 0; i < reps && st.is_ok(); ++i) {
    CU(D->cuStreamSynchronize(s));
    st = plan->execute(args);
    bridge.push_back(report.host_bridge_ms);
  }
  CU(D->cuStreamSynchronize(s));
  std::sort(bridge.begin(), bridge.end());
  if (st.is_ok() && !bridge.empty()) t.bridge_ms = bridge[bridge.size() / 2];
  return t;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += std::string("\\") + c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}


}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "gpu_bench.json", only;
  int reps = 20;
  double only_skew = -1.0;  // (< 0: every skew)
  double hold_seconds = 0;  // --hold
  bool quick = false, peers = true;
  std::vector<std::string> sweep;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--skew" && i + 1 < argc) only_skew = std::atof(argv[++i]);
    else if (a == "--quick") quick = true;
    else if (a == "--no-peers") peers = false;
    else if (a == "--hold" && i + 1 < argc) hold_seconds = std::atof(argv[++i]);
    else if (a == "--sweep" && i + 1 < argc) {
      const std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(';', at), list.size());
        if (end > at) sweep.push_back(list.substr(at, end - at));
        at = end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: gpu_bench [--json FILE] [--reps N] [--only SUBSTRING] [--skew S] [--quick] [--sweep SPECS] "
                           "[--no-peers] [--hold SECONDS]\n");
      return 2;
    }
  }
  std::string why;
  D = cuda::driver(&why);
  if (!D) {
    std::fprintf(stderr, "gpu_bench: %s\n", why.c_str());
    return 1;
  }
  CUdevice dev;
  CUcontext ctx;
  CU(D->cuDeviceGet(&dev, 0));
  CU(D->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(D->cuCtxPushCurrent(ctx));
  char devname[256] = {};
  D->cuDeviceGetName(devname, sizeof devname, dev);
  CUstream stream;
  CU(D->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  cublasHandle_t blas;
  CUBLAS(cublasCreate(&blas));
  CUBLAS(cublasSetStream(blas, reinterpret_cast<cudaStream_t>(stream)));

  std::vector<BenchCase> cases = bench_cases();
  if (quick) cases.resize(3);

  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::FILE* js = std::fopen(json_path.c_str(), "w");
  if (!js) {
    std::fprintf(stderr, "gpu_bench: cannot write %s\n", json_path.c_str());
    return 1;
  }
  std::fprintf(js, "{\"date\": \"%s\", \"device\": \"%s\", \"cases\": [\n", date, devname);
  // The file is a whole JSON document after the header and after every case: the closing
  // brackets are written and then overwritten by the next case, so that a run cut short (a time
  // limit on a shared GPU) leaves its finished cases readable.
  auto close_for_now = [js] {
    std::fputs("\n]}\n", js);
    std::fflush(js);
    std::fseek(js, -4, SEEK_END);
  };
  close_for_now();
  bool first_case = true;
  int index = 0, failures = 0;
  for (const auto& bc : cases) {
    ++index;
    if (!only.empty() && bc.name.find(only) == std::string::npos) continue;
    if (only_skew >= 0 && std::abs(bc.skew - only_skew) > 1e-9) continue;
    const auto preset = workloads::find_preset(bc.preset).value();
    const auto gemms = workloads::layer_gemms(preset, bc.tokens);
    const auto& g = bc.gemm == "up" ? gemms[0] : gemms[1];
    const std::int64_t M = g.m, K = g.k, N = g.n, E = g.groups;
    const auto sizes = workloads::route_group_sizes(bc.tokens, preset.top_k, E, bc.skew, kRouterSeed);
    std::int64_t active = 0, max_rows = 0;
    for (auto s : sizes) {
      active += s > 0;
      max_rows = std::max(max_rows, s);
    }
    std::fprintf(stderr, "[%d/%zu] %s skew=%.1f M=%lld K=%lld N=%lld E=%lld mode=%d\n", index, cases.size(),
                 bc.name.c_str(), bc.skew, (long long)M, (long long)K, (long long)N, (long long)E, bc.mode);

    // operands. mode 1: x [M,K], w [E,K,N] -> y [M,N]. mode 2: x [M,K], dy [M,N] -> dw [E,K,N].
    DevBuf x(std::size_t(M * K) * 2), w(std::size_t(E * K * N) * 2), y(std::size_t(M * N) * 2);
    DevBuf gs(std::size_t(E) * 4);
    fill_bf16(x, 1);
    if (bc.mode == 1) fill_bf16(w, 2); else fill_bf16(y, 3);
    std::vector<std::int32_t> gs32(sizes.begin(), sizes.end());
    CU(D->cuMemcpyHtoD(gs.p, gs32.data(), gs32.size() * 4));

    // A case that fails is recorded with its reason and the run goes on, so that one bad case
    // does not hide the others' numbers.
    auto record_failure = [&](const char* stage, const std::string& message) {
      std::fprintf(stderr, "  %s failed: %s\n", stage, message.c_str());
      std::fprintf(js, "%s  {\"name\": \"%s\", \"preset\": \"%s\", \"tokens\": %lld, \"gemm\": \"%s\", "
                       "\"mode\": %d, \"skew\": %.2f, \"error\": \"%s: %s\"}",
                   first_case ? "" : ",\n", bc.name.c_str(), bc.preset.c_str(), (long long)bc.tokens,
                   bc.gemm.c_str(), bc.mode, bc.skew, stage, json_escape(message).c_str());
      std::fflush(js);
      first_case = false;
      ++failures;
    };
    RaggedDotSpec spec;
    spec.group_sizes = {DType::kI32, {E}};
    if (bc.mode == 1) {
      spec.lhs = {DType::kBF16, {M, K}};
      spec.rhs = {DType::kBF16, {E, K, N}};
      spec.dims = RaggedDotDimensionNumbers::ragged_dot();
    } else {
      spec.lhs = {DType::kBF16, {M, K}};
      spec.rhs = {DType::kBF16, {M, N}};
      spec.dims = RaggedDotDimensionNumbers{};  // the spec defaults to ragged_dot's numbers
      spec.dims.dot.lhs_contracting = {0};
      spec.dims.dot.rhs_contracting = {0};
      spec.dims.lhs_ragged = {0};
    }
    auto op = RaggedDot::create(spec);
    if (!op.ok()) {
      record_failure("op", op.status().to_string());
      continue;
    }
    PlanOptions po;
    po.backend = "cuda";
    auto t0 = std::chrono::steady_clock::now();
    auto plan = make_plan(*op, po);
    const double plan_first_ms = wall_ms(t0);
    if (!plan.ok()) {
      record_failure("plan", plan.status().to_string());
      continue;
    }
    cuda::KernelCache::instance().clear_memory();
    t0 = std::chrono::steady_clock::now();
    auto plan_disk = make_plan(*op, po);
    const double plan_disk_ms = wall_ms(t0);
    t0 = std::chrono::steady_clock::now();
    auto plan_mem = make_plan(*op, po);
    const double plan_mem_ms = wall_ms(t0);

    ExecuteArgs args;
    args.lhs = {x.ptr(), x.bytes, MemorySpace::kDevice};
    args.rhs = {bc.mode == 1 ? w.ptr() : y.ptr(), bc.mode == 1 ? w.bytes : y.bytes, MemorySpace::kDevice};
    args.group_sizes = {gs.ptr(), gs.bytes, MemorySpace::kDevice};
    args.out = {bc.mode == 1 ? y.ptr() : w.ptr(), bc.mode == 1 ? y.bytes : w.bytes, MemorySpace::kDevice};
    args.stream = stream;
    DevBuf ws(plan->workspace_bytes());
    args.workspace = {ws.ptr(), plan->workspace_bytes(), MemorySpace::kDevice};
    Status st;
    const float one = 1.0f, zero = 0.0f;
    auto run_ragdot = [&] {
      if (st.is_ok()) st = plan->execute(args);
    };
    // the dense roof: one cuBLAS GEMM of the same FLOPs (row-major C = A B as column-major C^T = B^T A^T)
    DevBuf cd(bc.mode == 1 ? std::size_t(M * N) * 2 : 16);
    auto run_dense = [&] {
      CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &one, w.ptr(), CUDA_R_16BF, int(N),
                          x.ptr(), CUDA_R_16BF, int(K), &zero, cd.ptr(), CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
    };
    double ragdot_ms = -1, dense_ms = -1;
    if (bc.mode == 1) {
      std::tie(ragdot_ms, dense_ms) = time_alternating(stream, reps, run_ragdot, run_dense);
    } else {
      ragdot_ms = time_ms(stream, reps, run_ragdot);
    }
    if (!st.is_ok()) {
      record_failure("execute", st.to_string());
      continue;
    }

    // the variant sweep: each override timed in alternating rounds with the planner's choice (the
    // clocks drift by up to 30% within a case on some GPUs, so only alternation gives a fair ratio),
    // then the planner's choice again on its own (how far the clocks drifted since ragdot's column)
    std::string sweep_json;
    const char* user_variant = std::getenv("RAGDOT_CUDA_VARIANT");
    const std::string user_spec = user_variant ? user_variant : "";
    for (std::size_t i = 0; i <= sweep.size() && !sweep.empty(); ++i) {
      const bool again = i == sweep.size();
      // "measure": a measured plan (PlanningEffort::kMeasure) with this case's group sizes
      const bool measure = !again && sweep[i] == "measure";
      PlanOptions sweep_po = po;
      if (measure) {
        sweep_po.effort = PlanningEffort::kMeasure;
        sweep_po.measure_group_sizes = sizes;
      } else if (!again) {
        setenv("RAGDOT_CUDA_VARIANT", sweep[i].c_str(), 1);
      }
      const BackendTiming t = time_backend(*op, sweep_po, args, stream, reps, again || measure ? "" : plan->variant(),
                                           again ? std::function<void()>{} : std::function<void()>(run_ragdot));
      // back to what the run started with, so that "default again" times the same plan as ragdot's column
      if (user_variant) setenv("RAGDOT_CUDA_VARIANT", user_spec.c_str(), 1); else unsetenv("RAGDOT_CUDA_VARIANT");
      const std::string label = again ? "default again" : sweep[i];
      std::fprintf(stderr, "  sweep %-22s %8.3f ms (%4.0f TF/s)", label.c_str(), t.ms,
                   t.ms > 0 ? 2.0 * double(M) * double(K) * double(N) / t.ms / 1e9 : 0.0);
      if (t.baseline_ms > 0) std::fprintf(stderr, "  planner's %.3f ms (%.3fx)", t.baseline_ms, t.baseline_ms / t.ms);
      std::fprintf(stderr, "  %s%s\n", t.variant.c_str(), t.error.c_str());
      sweep_json += std::string(sweep_json.empty() ? "" : ", ") + "{\"spec\": \"" + json_escape(label) +
                    "\", \"ms\": " + std::to_string(t.ms) + ", \"baseline_ms\": " + std::to_string(t.baseline_ms) +
                    ", \"variant\": \"" + json_escape(t.variant) + "\", \"error\": \"" + json_escape(t.error) + "\"}";
    }

    // --hold: ragdot's kernel and the dense roof back to back, each for a while (see Hold)
    std::string hold_json;
    if (hold_seconds > 0) {
      std::vector<std::pair<const char*, std::function<void()>>> held = {{"ragdot", run_ragdot}};
      if (bc.mode == 1) held.push_back({"dense_roof", run_dense});
      for (const auto& [name, fn] : held) {
        const Hold h = hold_for(stream, hold_seconds, fn);
        std::fprintf(stderr, "  hold %-10s %8.3f ms a run over %.1f s, from %.3f\n", name, h.ms, h.end - h.start, h.start);
        char item[256];
        std::snprintf(item, sizeof item, "%s{\"name\": \"%s\", \"start\": %.3f, \"end\": %.3f, \"ms\": %.5f}",
                      hold_json.empty() ? "" : ", ", name, h.start, h.end, h.ms);
        hold_json += item;
      }
      if (!st.is_ok()) {
        record_failure("execute", st.to_string());
        continue;
      }
    }

    // ragdot with the weights stored [E, N, K], PyTorch's layout (nn.Linear's [out, in]; the
    // torch._grouped_mm peer gets it too): the same bytes read as that layout, for the time only
    BackendTiming nk_t;
    nk_t.error = "mode 1 only";
    if (bc.mode == 1) {
      RaggedDotSpec nk = spec;
      nk.rhs = {DType::kBF16, {E, N, K}};
      nk.dims.dot.rhs_contracting = {2};
      auto op_nk = RaggedDot::create(nk);
      if (op_nk.ok()) nk_t = time_backend(*op_nk, po, args, stream, reps);
      else nk_t.error = op_nk.status().to_string();
      std::fprintf(stderr, "  ragdot, weights [E, N, K] %8.3f ms  %s%s\n", nk_t.ms, nk_t.variant.c_str(), nk_t.error.c_str());
    }

    // ragdot's vendor-library backend and its GPU padded baseline (dropless: capacity = the largest group)
    const BackendTiming cublas_t = !peers ? BackendTiming{} : time_backend(*op, [] {
      PlanOptions o;
      o.backend = "cublas";
      o.memory_space = MemorySpace::kDevice;
      return o;
    }(), args, stream, reps);
    const BackendTiming padded_t = !peers ? BackendTiming{} : time_backend(*op, [&] {
      PlanOptions o;
      o.backend = "padded";
      o.memory_space = MemorySpace::kDevice;
      o.padded_max_group_rows = std::max<std::int64_t>(max_rows, 1);
      return o;
    }(), args, stream, reps);
    for (const auto* t : {&cublas_t, &padded_t}) {
      if (!t->error.empty()) std::fprintf(stderr, "  %s: %s\n", t == &cublas_t ? "cublas" : "padded", t->error.c_str());
    }

    // the other cuBLAS peers (row-major C = A B computed as column-major C^T = B^T A^T)
    double loop_ms = -1, grouped_ms = -1;
    if (bc.mode == 1) {
      std::vector<std::int64_t> start(std::size_t(E) + 1, 0);
      for (std::int64_t e = 0; e < E; ++e) start[e + 1] = start[e] + sizes[e];
      if (peers) loop_ms = time_ms(stream, reps, [&] {
        for (std::int64_t e = 0; e < E; ++e) {
          if (sizes[e] == 0) continue;
          CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(sizes[e]), int(K), &one,
                              static_cast<char*>(w.ptr()) + std::size_t(e * K * N) * 2, CUDA_R_16BF, int(N),
                              static_cast<char*>(x.ptr()) + std::size_t(start[e] * K) * 2, CUDA_R_16BF, int(K), &zero,
                              static_cast<char*>(cd.ptr()) + std::size_t(start[e] * N) * 2, CUDA_R_16BF, int(N),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
      });
      // grouped: one problem per non-empty expert, pointer arrays on the device, shapes on the host
      std::vector<cublasOperation_t> ta, tb;
      std::vector<int> mm, nn, kk, lda, ldb, ldc, group_size;
      std::vector<float> alpha, beta;
      std::vector<const void*> pa, pb;
      std::vector<void*> pc;
      for (std::int64_t e = 0; e < E; ++e) {
        if (sizes[e] == 0) continue;
        ta.push_back(CUBLAS_OP_N);
        tb.push_back(CUBLAS_OP_N);
        mm.push_back(int(N));
        nn.push_back(int(sizes[e]));
        kk.push_back(int(K));
        lda.push_back(int(N));
        ldb.push_back(int(K));
        ldc.push_back(int(N));
        group_size.push_back(1);
        alpha.push_back(1.0f);
        beta.push_back(0.0f);
        pa.push_back(static_cast<char*>(w.ptr()) + std::size_t(e * K * N) * 2);
        pb.push_back(static_cast<char*>(x.ptr()) + std::size_t(start[e] * K) * 2);
        pc.push_back(static_cast<char*>(cd.ptr()) + std::size_t(start[e] * N) * 2);
      }
      const int groups = int(pa.size());
      DevBuf dpa(std::size_t(groups) * 8), dpb(std::size_t(groups) * 8), dpc(std::size_t(groups) * 8);
      CU(D->cuMemcpyHtoD(dpa.p, pa.data(), std::size_t(groups) * 8));
      CU(D->cuMemcpyHtoD(dpb.p, pb.data(), std::size_t(groups) * 8));
      CU(D->cuMemcpyHtoD(dpc.p, pc.data(), std::size_t(groups) * 8));
      if (peers) grouped_ms = time_ms(stream, reps, [&] {
        CUBLAS(cublasGemmGroupedBatchedEx(blas, ta.data(), tb.data(), mm.data(), nn.data(), kk.data(), alpha.data(),
                                          static_cast<const void* const*>(dpa.ptr()), CUDA_R_16BF, lda.data(),
                                          static_cast<const void* const*>(dpb.ptr()), CUDA_R_16BF, ldb.data(),
                                          beta.data(), static_cast<void* const*>(dpc.ptr()), CUDA_R_16BF, ldc.data(),
                                          groups, group_size.data(), CUBLAS_COMPUTE_32F));
      });
    }
    const double flops = 2.0 * double(M) * double(K) * double(N);
    const double bytes = 2.0 * (double(active) * K * N + double(M) * K + double(M) * N);
    std::fprintf(stderr, "  ragdot %.3f ms (%.0f TF/s)  dense %.3f  loop %.3f  cublas-grouped %.3f  | %s\n", ragdot_ms,
                 flops / ragdot_ms / 1e9, dense_ms, loop_ms, grouped_ms, plan->variant().c_str());
    std::fprintf(stderr, "  ragdot cublas %.3f ms (bridge %.3f)  ragdot padded %.3f ms (bridge %.3f)\n", cublas_t.ms,
                 cublas_t.bridge_ms, padded_t.ms, padded_t.bridge_ms);
    std::fprintf(js, "%s  {\"name\": \"%s\", \"preset\": \"%s\", \"tokens\": %lld, \"gemm\": \"%s\", \"mode\": %d, "
                     "\"skew\": %.2f, \"M\": %lld, \"K\": %lld, \"N\": %lld, \"E\": %lld, \"active_experts\": %lld, "
                     "\"max_group\": %lld, \"flops\": %.6g, \"min_bytes\": %.6g, \"variant\": \"%s\", "
                     "\"plan_compile_ms\": %.2f, \"plan_disk_cache_ms\": %.3f, \"plan_memory_cache_ms\": %.3f, "
                     "\"ms\": {\"ragdot\": %.5f, \"dense_roof\": %.5f, \"per_expert_loop\": %.5f, "
                     "\"cublas_grouped\": %.5f, \"ragdot_cublas\": %.5f, \"ragdot_padded_gpu\": %.5f, "
                     "\"ragdot_weights_nk\": %.5f}, "
                     "\"bridge_ms\": {\"ragdot_cublas\": %.5f, \"ragdot_padded_gpu\": %.5f}, "
                     "\"variants\": {\"ragdot_cublas\": \"%s\", \"ragdot_padded_gpu\": \"%s\", "
                     "\"ragdot_weights_nk\": \"%s\"}, "
                     "\"errors\": {\"ragdot_cublas\": \"%s\", \"ragdot_padded_gpu\": \"%s\"}, \"sweep\": [%s], "
                     "\"hold\": [%s], \"group_sizes\": [",
                 first_case ? "" : ",\n", bc.name.c_str(), bc.preset.c_str(), (long long)bc.tokens, bc.gemm.c_str(),
                 bc.mode, bc.skew, (long long)M, (long long)K, (long long)N, (long long)E, (long long)active,
                 (long long)max_rows, flops, bytes, json_escape(plan->variant()).c_str(), plan_first_ms, plan_disk_ms,
                 plan_mem_ms, ragdot_ms, dense_ms, loop_ms, grouped_ms, cublas_t.ms, padded_t.ms, nk_t.ms,
                 cublas_t.bridge_ms, padded_t.bridge_ms, json_escape(cublas_t.variant).c_str(),
                 json_escape(padded_t.variant).c_str(), json_escape(nk_t.variant).c_str(),
                 json_escape(cublas_t.error).c_str(), json_escape(padded_t.error).c_str(), sweep_json.c_str(),
                 hold_json.c_str());
    for (std::size_t i = 0; i < sizes.size(); ++i) std::fprintf(js, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    std::fprintf(js, "]}");
    close_for_now();
    first_case = false;
    (void)plan_disk;
    (void)plan_mem;
  }
  std::fprintf(js, "\n]}\n");
  std::fclose(js);
  cublasDestroy(blas);
  if (failures) std::fprintf(stderr, "gpu_bench: %d case(s) failed (recorded in %s)\n", failures, json_path.c_str());
  return failures ? 1 : 0;
}
