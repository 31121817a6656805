// CPU benchmark: ragdot's cpu backend against the best dense GEMM on this machine for the same
// FLOPs (oneDNN bf16 matmul on AMX, oneDNN f32 and OpenBLAS sgemm), and against the padded
// baseline, on MoE shapes scaled to CPU size, uniform and skewed routing. Writes JSON and a table.
//
//   cpu_peers [--json FILE] [--reps N] [--rounds R] [--dtype bf16|f32] [--quick]
#include <oneapi/dnnl/dnnl.hpp>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ragdot/ragdot.hpp"

namespace {

using ragdot::DType;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F>
double median_seconds(F&& f, int reps) {
  f();  // warm-up (page faults, packing buffers, thread pools)
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double s = now();
    f();
    t.push_back(now() - s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Aligned {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit Aligned(std::size_t n) : p(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64)), bytes(n) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
};

void fill(void* p, DType dt, std::size_t count, std::uint64_t seed) {
  ragdot::workloads::SplitMix64 rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    float v = float(rng.uniform() * 2.0 - 1.0);
    if (dt == DType::kF32) {
      static_cast<float*>(p)[i] = v;
    } else {
      std::uint32_t u;
      std::memcpy(&u, &v, 4);
      static_cast<std::uint16_t*>(p)[i] = std::uint16_t(u >> 16);
    }
  }
}

struct CaseDef {
  std::string name;
  std::int64_t tokens, hidden, ffn, experts, top_k;
  bool up;
};

struct Row {
  std::string name, dtype;
  double skew;
  std::int64_t m, k, n, g, max_group;
  double gflop, ragdot_s, dense_s, dense2_s, padded_s;
  std::string dense_name, dense2_name;
};

double dnnl_matmul_seconds(std::int64_t M, std::int64_t K, std::int64_t N, DType dt, int reps) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const auto t = dt == DType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::desc a({M, K}, t, memory::format_tag::ab), b({K, N}, t, memory::format_tag::ab),
      c({M, N}, t, memory::format_tag::ab);
  matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
  matmul mm(pd);
  memory A(a, eng), B(b, eng), C(c, eng);
  fill(A.get_data_handle(), dt, std::size_t(M * K), 1);
  fill(B.get_data_handle(), dt, std::size_t(K * N), 2);
  return median_seconds([&] {
    mm.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    s.wait();
  }, reps);
}

double openblas_seconds(std::int64_t M, std::int64_t K, std::int64_t N, int reps) {
  std::vector<float> A(std::size_t(M * K)), B(std::size_t(K * N)), C(std::size_t(M * N));
  fill(A.data(), DType::kF32, A.size(), 1);
  fill(B.data(), DType::kF32, B.size(), 2);
  return median_seconds([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, A.data(), int(K), B.data(),
                int(N), 0.0f, C.data(), int(N));
  }, reps);
}

// Times one backend on the ragged dot; returns seconds or a negative number on failure.
double ragdot_seconds(const std::string& backend, std::int64_t M, std::int64_t K, std::int64_t N,
                      const std::vector<std::int64_t>& sizes, DType dt, int reps, std::int64_t max_group) {
  const std::int64_t G = std::int64_t(sizes.size());
  auto op = ragdot::RaggedDot::ragged_dot(M, K, N, G, dt);
  if (!op.ok()) return -1;
  ragdot::PlanOptions po;
  po.backend = backend;
  if (backend == "padded") po.padded_max_group_rows = max_group;
  auto plan = ragdot::make_plan(*op, po);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", backend.c_str(), plan.status().to_string().c_str());
    return -1;
  }
  const std::size_t es = ragdot::dtype_size(dt);
  Aligned lhs(std::size_t(M * K) * es), rhs(std::size_t(G * K * N) * es), out(std::size_t(M * N) * es),
      ws(plan->workspace_bytes());
  fill(lhs.p, dt, std::size_t(M * K), 3);
  fill(rhs.p, dt, std::size_t(G * K * N), 4);
  std::vector<std::int32_t> gs(sizes.begin(), sizes.end());
  ragdot::ExecuteArgs a;
  a.lhs = {lhs.p, lhs.bytes};
  a.rhs = {rhs.p, rhs.bytes};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {out.p, out.bytes};
  a.workspace = {ws.p, plan->workspace_bytes()};
  bool ok = true;
  double t = median_seconds([&] { ok = ok && plan->execute(a).is_ok(); }, reps);
  return ok ? t : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 7, rounds = 3;
  bool quick = false;
  std::string only_dtype;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick") quick = true;
    else if (a == "--dtype" && i + 1 < argc) only_dtype = argv[++i];
    else {
      std::fprintf(stderr, "usage: cpu_peers [--json FILE] [--reps N] [--rounds R] [--dtype bf16|f32] [--quick]\n");
      return 2;
    }
  }
  // MoE shapes scaled to a 2-core CPU: the token counts, experts and top-k of the GPU workloads
  // (so rows per expert are the same), hidden and ffn divided by 4 (mixtral) and 2 (qwen3).
  std::vector<CaseDef> cases = {
      {"mixtral-up", 4096, 1024, 3584, 8, 2, true},
      {"mixtral-down", 4096, 1024, 3584, 8, 2, false},
      {"qwen3-up", 8192, 1024, 384, 128, 8, true},
      {"qwen3-down", 8192, 1024, 384, 128, 8, false},
  };
  if (quick) cases.resize(1);
  std::vector<Row> rows;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    if (!only_dtype.empty() && only_dtype != ragdot::dtype_name(dt)) continue;
    for (const auto& c : cases) {
      for (double skew : {0.0, 1.2}) {
        const std::int64_t M = c.tokens * c.top_k;
        const std::int64_t K = c.up ? c.hidden : c.ffn, N = c.up ? 2 * c.ffn : c.hidden;
        auto sizes = ragdot::workloads::route_group_sizes(c.tokens, c.top_k, c.experts, skew, 2026);
        Row r;
        r.name = c.name;
        r.dtype = std::string(ragdot::dtype_name(dt));
        r.skew = skew;
        r.m = M;
        r.k = K;
        r.n = N;
        r.g = c.experts;
        r.max_group = *std::max_element(sizes.begin(), sizes.end());
        r.gflop = 2.0 * double(M) * double(K) * double(N) / 1e9;
        std::fprintf(stderr, "[%zu] %s %s skew=%.1f M=%lld K=%lld N=%lld G=%lld ...\n", rows.size() + 1, r.name.c_str(),
                     r.dtype.c_str(), skew, (long long)M, (long long)K, (long long)N, (long long)r.g);
        // ragdot and the dense peers are timed in alternating rounds and each keeps its best
        // round's median: on a shared machine a slow spell then hits one round, not one method.
        auto best = [](double a, double b) { return a > 0 && a < b ? a : b; };
        r.ragdot_s = r.dense_s = 1e30;
        r.dense2_s = 0;
        r.dense_name = dt == DType::kBF16 ? "onednn-bf16" : "onednn-f32";
        r.dense2_name = dt == DType::kBF16 ? "" : "openblas-sgemm";
        for (int round = 0; round < rounds; ++round) {
          r.ragdot_s = best(ragdot_seconds("cpu", M, K, N, sizes, dt, reps, r.max_group), r.ragdot_s);
          r.dense_s = best(dnnl_matmul_seconds(M, K, N, dt, reps), r.dense_s);
          if (dt == DType::kF32) r.dense2_s = best(openblas_seconds(M, K, N, reps), r.dense2_s > 0 ? r.dense2_s : 1e30);
        }
        r.padded_s = ragdot_seconds("padded", M, K, N, sizes, dt, std::max(3, reps / 2), r.max_group);
        rows.push_back(r);
      }
    }
  }
  auto tf = [](double gflop, double s) { return s > 0 ? gflop / s : 0.0; };
  std::printf("%-13s %-5s %4s %6s %5s %5s %4s | %8s %8s %8s %8s | %6s %6s\n", "case", "dtype", "skew", "M", "K", "N",
              "G", "ragdot", "dense", "dense2", "padded", "/roof", "/pad");
  for (const auto& r : rows) {
    const double best = std::max(tf(r.gflop, r.dense_s), tf(r.gflop, r.dense2_s));
    std::printf("%-13s %-5s %4.1f %6lld %5lld %5lld %4lld | %8.1f %8.1f %8.1f %8.1f | %6.2f %6.2f\n", r.name.c_str(),
                r.dtype.c_str(), r.skew, (long long)r.m, (long long)r.k, (long long)r.n, (long long)r.g,
                tf(r.gflop, r.ragdot_s), tf(r.gflop, r.dense_s), tf(r.gflop, r.dense2_s), tf(r.gflop, r.padded_s),
                tf(r.gflop, r.ragdot_s) / best, r.padded_s > 0 ? r.padded_s / r.ragdot_s : 0.0);
  }
  std::printf("(GFLOP/s; dense = %s, dense2 = openblas-sgemm for f32; /roof = ragdot / best dense; /pad = speedup over padded)\n",
              "onednn matmul");
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::perror(json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\"benchmark\": \"cpu_peers\", \"hardware_threads\": %u, \"rows\": [\n",
                 std::thread::hardware_concurrency());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::fprintf(f,
                   "  {\"case\": \"%s\", \"dtype\": \"%s\", \"skew\": %.2f, \"m\": %lld, \"k\": %lld, \"n\": %lld, "
                   "\"groups\": %lld, \"max_group\": %lld, \"gflop\": %.4f, \"ragdot_s\": %.6g, \"%s_s\": %.6g%s%s, "
                   "\"padded_s\": %.6g}%s\n",
                   r.name.c_str(), r.dtype.c_str(), r.skew, (long long)r.m, (long long)r.k, (long long)r.n,
                   (long long)r.g, (long long)r.max_group, r.gflop, r.ragdot_s, r.dense_name.c_str(), r.dense_s,
                   r.dense2_name.empty() ? "" : (", \"" + r.dense2_name + "_s\": ").c_str(),
                   r.dense2_name.empty() ? "" : std::to_string(r.dense2_s).c_str(), r.padded_s,
                   i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
