// The cuda backend's code generation, without a GPU: every variant the planner can choose
// compiles with NVRTC for sm_80 and sm_90a, uses no local memory (no spills, no stack), and the
// JIT cache publishes, rejects and survives entries as it promises.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "backends/cuda/kernel_cache.hpp"
#include "backends/cuda/kernel_variant.hpp"
#include "backends/cuda/nvrtc_compiler.hpp"
#include "backends/cuda/variant_candidates.hpp"
#include "backends/cuda/embedded_kernels.hpp"
#include "ragdot/tile_order.h"

namespace ragdot::cuda {
namespace {

namespace fs = std::filesystem;

// The stack frame and spill bytes ptxas reports for the group GEMM entry point.
struct Resources {
  int registers = -1, stack = -1, spill_stores = -1, spill_loads = -1;
};
Resources resources_of(const std::string& log, const std::string& entry = kKernelEntry) {
  Resources r;
  // ptxas prints a "Compiling entry function" block per kernel; find ours.
  const auto at = log.find("'" + entry + "'");
  if (at == std::string::npos) return r;
  const std::string tail = log.substr(at, 600);
  std::smatch m;
  if (std::regex_search(tail, m, std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    r.stack = std::stoi(m[1]);
    r.spill_stores = std::stoi(m[2]);
    r.spill_loads = std::stoi(m[3]);
  }
  if (std::regex_search(tail, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
  return r;
}

void compile_all(const DeviceTraits& d) {
  const std::string arch = arch_for(d);
  const auto variants = all_variants(d);
  ASSERT_GT(variants.size(), 0u);
  std::set<std::string> names;
  for (const auto& v : variants) EXPECT_TRUE(names.insert(v.name()).second) << "duplicate variant " << v.name();
  std::vector<std::string> failures(variants.size());
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (std::size_t i = w; i < variants.size(); i += workers) {
        const auto out = compile_to_cubin(generate_source(variants[i]), "ragdot_kernel.cu", embedded_kernel_headers(), arch);
        if (!out.ok()) {
          failures[i] = out.status().message();
          continue;
        }
        // both of the module's kernels: the group GEMM and checked mode's group-size check
        for (const char* entry : {kKernelEntry, "ragdot_check_group_sizes"}) {
          const Resources r = resources_of(out->log, entry);
          if (r.spill_stores != 0 || r.spill_loads != 0 || r.stack != 0)
            failures[i] += std::string(entry) + " uses local memory: stack " + std::to_string(r.stack) +
                           ", spill stores " + std::to_string(r.spill_stores) + ", spill loads " +
                           std::to_string(r.spill_loads) + "\n" + out->log;
        }
        if (out->cubin.size() < 16 || std::string(out->cubin.data() + 1, 3) != "ELF") failures[i] += " not an ELF cubin";
      }
    });
  }
  for (auto& t : pool) t.join();
  for (std::size_t i = 0; i < variants.size(); ++i)
    EXPECT_TRUE(failures[i].empty()) << arch << " " << variants[i].name() << ": " << failures[i];
}

TEST(CudaCodegen, NvrtcIsAvailable) {
  std::string why;
  EXPECT_FALSE(nvrtc_version(&why).empty()) << why;
}

TEST(CudaCodegen, EveryVariantCompilesForSm80WithoutLocalMemory) { compile_all(DeviceTraits{8, 0, 163 * 1024}); }

TEST(CudaCodegen, EveryVariantCompilesForSm90aWithoutLocalMemory) { compile_all(DeviceTraits{9, 0, 227 * 1024}); }

TEST(CudaCodegen, RelayoutCopyCompilesWithoutLocalMemory) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto k = KernelCache::instance().get("#include \"ragdot/relayout_copy.cuh\"\n", "ragdot_relayout.cu", arch);
    ASSERT_TRUE(k.ok()) << arch << ": " << k.status().to_string();
    const Resources r = resources_of((*k)->log, "ragdot_relayout_copy");
    EXPECT_EQ(r.stack, 0) << arch << "\n" << (*k)->log;
    EXPECT_EQ(r.spill_stores + r.spill_loads, 0) << arch << "\n" << (*k)->log;
    EXPECT_EQ(std::string((*k)->cubin.data() + 1, 3), "ELF") << arch;
  }
}

TEST(CudaCodegen, MoeKernelsCompileWithoutLocalMemory) {
  const struct {
    const char* header;
    std::vector<const char*> kernels;
  } modules[] = {
      {"moe_permute", {"ragdot_moe_count", "ragdot_moe_offsets", "ragdot_moe_scatter", "ragdot_moe_sort_one_block",
                       "ragdot_moe_gather", "ragdot_moe_gather_warps", "ragdot_moe_combine",
                       "ragdot_moe_finish_combine"}},
      {"moe_route", {"ragdot_moe_route", "ragdot_moe_route_backward"}},
      {"moe_glu", {"ragdot_moe_glu", "ragdot_moe_glu_backward", "ragdot_moe_glu_backward_weighted"}},
      {"moe_combine_backward", {"ragdot_moe_combine_backward", "ragdot_moe_combine_backward_warps"}},
      {"moe_accumulate", {"ragdot_moe_accumulate"}},
      {"fill_uniform", {"ragdot_fill_uniform"}},
  };
  for (const auto& m : modules) {
    const std::string source = std::string("#include \"ragdot/") + m.header + ".cuh\"\n";
    for (const char* arch : {"sm_80", "sm_90a"}) {
      auto k = KernelCache::instance().get(source, std::string("ragdot_") + m.header + ".cu", arch);
      ASSERT_TRUE(k.ok()) << m.header << " " << arch << ": " << k.status().to_string();
      EXPECT_EQ(std::string((*k)->cubin.data() + 1, 3), "ELF") << arch;
      for (const char* fn : m.kernels) {
        const Resources r = resources_of((*k)->log, fn);
        EXPECT_GT(r.registers, 0) << arch << ": no ptxas report of " << fn << "\n" << (*k)->log;
        EXPECT_EQ(r.stack, 0) << arch << " " << fn << "\n" << (*k)->log;
        EXPECT_EQ(r.spill_stores + r.spill_loads, 0) << arch << " " << fn << "\n" << (*k)->log;
      }
    }
  }
}

TEST(CudaCodegen, PlannerPicksTensorCoresForMoeLayouts) {
  core::GroupGemmProblem p;
  p.mode = RaggedMode::kNonContracting;
  p.lhs_dtype = p.rhs_dtype = p.out_dtype = DType::kBF16;
  p.num_groups = p.computed_groups = 8;
  p.m = 4096, p.k = 1024, p.n = 3584;
  p.ragged_extent = 4096;
  p.lhs_m = 1024, p.lhs_k = 1;
  p.rhs_g = 1024 * 3584, p.rhs_k = 3584, p.rhs_n = 1;  // [E, K, N]
  p.out_m = 3584, p.out_n = 1;
  const DeviceTraits h{9, 0, 227 * 1024}, a100{8, 0, 163 * 1024};
  auto v = choose_variant(p, h);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->family, KernelFamily::kWgmma) << v->name();
  EXPECT_FALSE(v->b_k_major);
  v = choose_variant(p, a100);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->family, KernelFamily::kMmaSync) << v->name();
  p.rhs_k = 1, p.rhs_n = 1024;  // [E, N, K]
  v = choose_variant(p, h);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->family, KernelFamily::kWgmma);
  EXPECT_TRUE(v->b_k_major);
  {
    auto decode = p;  // 8 rows per expert: on Hopper the wgmma family (TMA streams the weights)
    decode.m = decode.ragged_extent = 64;
    v = choose_variant(decode, h);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->family, KernelFamily::kWgmma) << v->name();
    v = choose_variant(decode, h, /*wgmma_small_groups=*/false);  // RAGDOT_CUDA_VARIANT=small_groups=mma
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->family, KernelFamily::kMmaSync) << v->name();
    EXPECT_EQ(v->bm, 64);  // the small-tile mma variant
    v = choose_variant(decode, a100);  // off Hopper: the small-tile mma variant
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->family, KernelFamily::kMmaSync) << v->name();
    EXPECT_EQ(v->bm, 64);
  }
  {
    // the weight gradient: lhs [T, K] and the output gradient [T, N], both ragged along the
    // token rows T (mode 2's contracting dim): out[g] = lhs_g^T dout_g, [E, K, N]
    core::GroupGemmProblem w = p;
    w.mode = RaggedMode::kContracting;
    w.m = 1024, w.k = 4096, w.n = 3584, w.ragged_extent = 4096;
    w.lhs_m = 1, w.lhs_k = 1024;
    w.rhs_g = 0, w.rhs_k = 3584, w.rhs_n = 1;
    w.out_g = 1024 * 3584, w.out_m = 3584, w.out_n = 1;
    v = choose_variant(w, h);
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_EQ(v->family, KernelFamily::kWgmma) << v->name();
    EXPECT_EQ(v->mode, 2);
    EXPECT_FALSE(v->a_k_major);
    EXPECT_FALSE(v->b_k_major);
    const auto all = all_variants(h);
    EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end());
    v = choose_variant(w, a100);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->family, KernelFamily::kMmaSync) << v->name();
  }
  p.lhs_dtype = p.rhs_dtype = DType::kF32;  // f32 keeps exact products: the FMA family
  v = choose_variant(p, h);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->family, KernelFamily::kSimt);
  // every variant the planner returns is in the enumerated set CI compiles
  const auto all = all_variants(h);
  EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end());
}

// The SwiGLU epilogue (PlanOptions::swiglu_epilogue) is the Hopper family's, for an [E, K, N]
// rhs and 16-bit outputs; elsewhere the cuda backend says it cannot, so the planner moves on.
// CI compiles all_variants; the planner must never choose a variant outside that list, or a
// user's first plan would be the first compile of its kernel. Sweeps choose_variant over every
// mode, dtype triple, weight layout, fused row form and a spread of shapes and group counts
// (rows per group from under one to thousands) on a Hopper and an Ampere device.
TEST(CudaCodegen, EveryVariantThePlannerChoosesIsCompiledInCi) {
  const DType types[] = {DType::kF32, DType::kBF16, DType::kF16};
  std::size_t chosen = 0;
  std::set<std::string> missing;
  for (const DeviceTraits& d : {DeviceTraits{9, 0, 227 * 1024, 132}, DeviceTraits{8, 0, 163 * 1024, 108}}) {
    const std::vector<KernelVariant> all = all_variants(d);
    const std::set<std::string> compiled = [&] {
      std::set<std::string> names;
      for (const KernelVariant& v : all) names.insert(v.name());
      return names;
    }();
    for (int mode = 1; mode <= 3; ++mode)
      for (DType in : types)
        for (DType out : types)
          for (bool b_k : {false, true})
            for (int fused = 0; fused < 5; ++fused)  // none, gathered rows, scatter, both, SwiGLU
              for (std::int64_t n : {64, 200, 256, 768, 1536, 4096})
                for (std::int64_t m : {64, 1024, 4096, 32768})
                  for (std::int64_t k : {256, 2048, 32768})
                    for (std::int64_t g : {8, 128, 256, 1000})
                      for (bool small_on_wgmma : {true, false}) {
                        const bool gather = fused == 1 || fused == 3, scatter = fused == 2 || fused == 3;
                        if (mode != 1 && (scatter || fused == 4)) continue;
                        if (mode == 3 && gather) continue;
                        core::GroupGemmProblem p;
                        p.lhs_dtype = p.rhs_dtype = in;
                        p.out_dtype = out;
                        p.num_groups = p.computed_groups = g;
                        p.m = m, p.n = n, p.k = k;
                        if (mode == 2) {  // out[g] = lhs_g^T rhs_g, ragged along k
                          p.mode = RaggedMode::kContracting;
                          p.ragged_extent = k;
                          p.lhs_m = 1, p.lhs_k = m;
                          p.rhs_g = 0, p.rhs_k = n, p.rhs_n = 1;
                          p.out_g = m * n, p.out_m = n, p.out_n = 1;
                        } else {
                          p.mode = mode == 1 ? RaggedMode::kNonContracting : RaggedMode::kBatch;
                          p.ragged_extent = m;
                          p.lhs_m = k, p.lhs_k = 1;
                          p.rhs_g = k * n;
                          if (b_k) p.rhs_k = 1, p.rhs_n = k;
                          else p.rhs_k = n, p.rhs_n = 1;
                          p.out_m = fused == 4 ? n / 2 : n, p.out_n = 1;
                          if (mode == 3) p.out_g = m * n;
                        }
                        if (gather) p.lhs_gather_rows = 4096;
                        if (scatter) p.out_scatter_rows = 4096;
                        p.swiglu_epilogue = fused == 4;
                        const auto v = choose_variant(p, d, small_on_wgmma);
                        if (!v.ok()) continue;
                        ++chosen;
                        if (!compiled.count(v->name())) missing.insert(v->name() + " (sm_" + std::to_string(d.cc_major) + "0)");
                      }
  }
  EXPECT_GT(chosen, 10000u);  // the sweep reached the planner, not only its refusals
  std::string list;
  for (const std::string& name : missing) list += "\n  " + name;
  EXPECT_TRUE(missing.empty()) << missing.size() << " chosen variants CI does not compile:" << list;
}

TEST(CudaCodegen, SwigluEpilogueIsPlannedOnTheHopperFamilyOnly) {
  core::GroupGemmProblem p;
  p.mode = RaggedMode::kNonContracting;
  p.lhs_dtype = p.rhs_dtype = p.out_dtype = DType::kBF16;
  p.num_groups = p.computed_groups = 128;
  p.m = p.ragged_extent = 32768, p.k = 2048, p.n = 1536;  // qwen3-30b-a3b's fused gate and up projection
  p.lhs_m = 2048, p.lhs_k = 1;
  p.rhs_g = 2048 * 1536, p.rhs_k = 1536, p.rhs_n = 1;  // [E, K, N]
  p.out_m = 768, p.out_n = 1;                          // the planner's: out [M, N / 2]
  p.swiglu_epilogue = true;
  const DeviceTraits h{9, 0, 227 * 1024}, a100{8, 0, 163 * 1024};
  auto v = choose_variant(p, h);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->family, KernelFamily::kWgmma);
  EXPECT_TRUE(v->swiglu);
  EXPECT_NE(v->name().find("swiglu"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("kSwiglu = true"), std::string::npos);
  const auto all = all_variants(h);
  EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name();
  // tile widths whose halves are whole 64-column boxes only
  EXPECT_TRUE(override_variant(*v, "bn=128", h).ok());
  EXPECT_EQ(override_variant(*v, "bn=192", h).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(override_variant(*v, "bn=64", h).status().code(), StatusCode::kInvalidArgument);
  auto pairs = override_variant(*v, "cluster=2", h);
  ASSERT_TRUE(pairs.ok()) << pairs.status().message();
  EXPECT_NE(std::find(all.begin(), all.end(), *pairs), all.end()) << pairs->name();
  // not elsewhere: sm_80, an [E, N, K] rhs, f32 outputs
  EXPECT_EQ(choose_variant(p, a100).status().code(), StatusCode::kUnsupported);
  auto nk = p;
  nk.rhs_k = 1, nk.rhs_n = 2048;
  EXPECT_EQ(choose_variant(nk, h).status().code(), StatusCode::kUnsupported);
  auto f32_out = p;
  f32_out.out_dtype = DType::kF32;
  EXPECT_EQ(choose_variant(f32_out, h).status().code(), StatusCode::kUnsupported);
  // without the epilogue the same problem is the plain wgmma variant
  auto plain = p;
  plain.swiglu_epilogue = false;
  plain.out_m = 1536;
  v = choose_variant(plain, h);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->swiglu);
}

// Rows added into a table (PlanOptions::out_scatter_rows): the Hopper family's epilogue, for
// 16-bit outputs and either weight layout; elsewhere the cuda backend says it cannot.
TEST(CudaCodegen, ScatterAddRowsIsPlannedOnTheHopperFamilyOnly) {
  core::GroupGemmProblem p;
  p.mode = RaggedMode::kNonContracting;
  p.lhs_dtype = p.rhs_dtype = p.out_dtype = DType::kBF16;
  p.num_groups = p.computed_groups = 128;
  p.m = p.ragged_extent = 32768, p.k = 768, p.n = 2048;  // qwen3-30b-a3b's down projection
  p.lhs_m = 768, p.lhs_k = 1;
  p.rhs_g = 768 * 2048, p.rhs_k = 2048, p.rhs_n = 1;  // [E, K, N]
  p.out_m = 2048, p.out_n = 1;
  p.out_scatter_rows = 4096;  // the tokens
  const DeviceTraits h{9, 0, 227 * 1024}, a100{8, 0, 163 * 1024};
  auto v = choose_variant(p, h);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->family, KernelFamily::kWgmma);
  EXPECT_TRUE(v->scatter_out);
  EXPECT_NE(v->name().find("scatter"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("kScatterOut = true"), std::string::npos);
  const auto all = all_variants(h);
  EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name();
  auto nk = p;  // [E, N, K] weights
  nk.rhs_k = 1, nk.rhs_n = 768;
  v = choose_variant(nk, h);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_TRUE(v->scatter_out && v->b_k_major) << v->name();
  EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name();
  EXPECT_EQ(choose_variant(p, a100).status().code(), StatusCode::kUnsupported);
  auto f32_out = p;
  f32_out.out_dtype = DType::kF32;
  EXPECT_EQ(choose_variant(f32_out, h).status().code(), StatusCode::kUnsupported);
}

// cuobjdump: $RAGDOT_CUOBJDUMP, the toolkit's, or the one of the PyPI wheel nvidia-cuda-cuobjdump.
std::string find_cuobjdump() {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("RAGDOT_CUOBJDUMP")) candidates.push_back(e);
  candidates.push_back("/usr/local/cuda/bin/cuobjdump");
  if (std::FILE* f = popen("python3 -c 'import importlib.util as u; s = u.find_spec(\"nvidia\"); "
                           "print(*s.submodule_search_locations, sep=chr(10))' 2>/dev/null", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      std::string dir(line);
      while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
      for (const char* sub : {"/cu13/bin/cuobjdump", "/cuda_cuobjdump/bin/cuobjdump"}) candidates.push_back(dir + sub);
    }
    pclose(f);
  }
  for (const auto& c : candidates)
    if (!c.empty() && ::access(c.c_str(), X_OK) == 0) return c;
  return "";
}

std::string run_and_capture(const std::string& command) {
  std::string out;
  if (std::FILE* f = popen(command.c_str(), "r")) {
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
  }
  return out;
}

// Every override in `bad` fails on `v`, with a message that names `word`.
void expect_rejected(const KernelVariant& v, std::initializer_list<const char*> bad, const char* word) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  for (const char* spec : bad) {
    auto r = override_variant(v, spec, hopper);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_NE(r.status().message().find(word), std::string::npos) << r.status().to_string();
  }
}

TEST(CudaCodegen, VariantOverrideChangesTheTileOrSaysWhatIsWrong) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  const auto variants = all_variants(hopper);
  const auto wgmma = std::find_if(variants.begin(), variants.end(),
                                  [](const KernelVariant& v) { return v.family == KernelFamily::kWgmma && v.bn == 256; });
  const auto simt = std::find_if(variants.begin(), variants.end(),
                                 [](const KernelVariant& v) { return v.family == KernelFamily::kSimt; });
  ASSERT_NE(wgmma, variants.end());
  ASSERT_NE(simt, variants.end());
  auto v = override_variant(*wgmma, "bn=128", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->bn, 128);
  EXPECT_GT(v->stages, wgmma->stages);  // a smaller stage fits more of them
  v = override_variant(*wgmma, "stages=3,bn=192", hopper);  // stages holds whatever the order
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->bn, 192);
  EXPECT_EQ(v->stages, 3);
  EXPECT_TRUE(compile_to_cubin(generate_source(*v), "ragdot_kernel.cu", embedded_kernel_headers(), "sm_90a").ok());
  expect_rejected(*wgmma, {"bn=100", "bn=512", "stages=1", "stages=9", "bm=64", "bn", "bn=12x"}, "RAGDOT_CUDA_VARIANT");
  // an unknown key is named as such whatever its value; a known integer key with a word is not an integer
  expect_rejected(*wgmma, {"bk=64", "boxes=one", "colour=red"}, "unknown key");
  expect_rejected(*wgmma, {"bn=wide", "stages=", "ctas=4x"}, "is not key=integer");
  EXPECT_FALSE(override_variant(*wgmma, "stages=8", hopper).ok());  // 8 x 48 KiB does not fit
  // keys the family does not have leave it as it is
  auto same = override_variant(*simt, "bn=128,stages=2", hopper);
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_EQ(*same, *simt);
  EXPECT_FALSE(override_variant(*simt, "bn=100", hopper).ok());  // but a bad value is still an error
  // small_groups: accepted here, applied by choose_variant (PlannerPicksTensorCoresForMoeLayouts)
  EXPECT_TRUE(override_variant(*wgmma, "small_groups=mma,bn=128", hopper).ok());
  EXPECT_FALSE(override_variant(*wgmma, "small_groups=1", hopper).ok());
  EXPECT_TRUE(small_groups_on_wgmma("bn=128"));
  EXPECT_FALSE(small_groups_on_wgmma("bn=128,small_groups=mma"));
  EXPECT_TRUE(small_groups_on_wgmma("small_groups=mma,small_groups=wgmma"));
  // cluster: CTA pairs sharing B, on the wgmma family without gathered rows, bn 128 or 256
  v = override_variant(*wgmma, "cluster=2", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->cluster, 2);
  EXPECT_NE(v->name().find("cluster2"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("__cluster_dims__(2, 1, 1)"), std::string::npos);
  EXPECT_EQ(generate_source(*wgmma).find("__cluster_dims__"), std::string::npos);
  v = override_variant(*wgmma, "cluster=2,bn=128", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->cluster, 2);
  EXPECT_EQ(v->bn, 128);
  EXPECT_EQ(override_variant(*v, "cluster=1", hopper)->cluster, 1);
  v = override_variant(*wgmma, "cluster=2n", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->cluster, 2);
  EXPECT_TRUE(v->cluster_along_n);
  EXPECT_NE(v->name().find("cluster2n"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("kClusterAlongN = true"), std::string::npos);
  EXPECT_FALSE(override_variant(*v, "cluster=2", hopper)->cluster_along_n);
  EXPECT_FALSE(override_variant(*v, "cluster=1", hopper)->cluster_along_n);
  v = override_variant(*wgmma, "cluster=4", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->pairs_along_m() && v->pairs_along_n());
  EXPECT_NE(v->name().find("cluster4"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("__cluster_dims__(4, 1, 1)"), std::string::npos);
  expect_rejected(*wgmma, {"cluster=3", "cluster=0", "cluster=n", "cluster=2m", "cluster=4n", "cluster=2,bn=192",
                           "cluster=2,bn=64", "cluster=4,bn=192"}, "cluster");
  // raster: accepted here (the plan applies it), in KiB, 0 = the plain order
  EXPECT_EQ(*override_variant(*wgmma, "raster=64", hopper), *wgmma);
  expect_rejected(*wgmma, {"raster=-1", "raster=x", "raster=", "raster=5000000"}, "raster");
  EXPECT_EQ(raster_bytes(""), 0);
  EXPECT_EQ(raster_bytes("bn=128,raster=64"), 64 << 10);
  EXPECT_EQ(raster_bytes("raster=25600,raster=0"), 0);
  // epilogue=tma: the weight gradient's, 16-bit outputs; elsewhere ignored
  const auto mode2 = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
    return k.family == KernelFamily::kWgmma && k.mode == 2 && k.out == DType::kBF16 && k.bn == 256 && !k.tma_store &&
           k.cluster == 1 && !k.strips;
  });
  ASSERT_NE(mode2, variants.end());
  v = override_variant(*mode2, "epilogue=tma", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->tma_store);
  EXPECT_LT(v->stages, mode2->stages);  // the staging area takes a stage's room
  EXPECT_NE(v->name().find("tmastore"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("map_out"), std::string::npos);
  EXPECT_FALSE(override_variant(*v, "epilogue=direct", hopper)->tma_store);
  ASSERT_EQ(wgmma->out, DType::kF32);
  EXPECT_FALSE(override_variant(*wgmma, "epilogue=tma", hopper)->tma_store);  // f32 outputs: ignored
  KernelVariant f32_out = *mode2;
  f32_out.out = DType::kF32;
  EXPECT_FALSE(override_variant(f32_out, "epilogue=tma", hopper)->tma_store);
  EXPECT_FALSE(override_variant(*mode2, "epilogue=smem", hopper).ok());
  // epilogue=tma in mode 1: the plain epilogue's 16-bit outputs (gathered rows too), boxes of 64 x
  // 32 through 16 KiB of staging: four stages of a 256-wide tile beside a table of up to 512
  // groups, three beside the largest; not with CTA pairs, split tiles or swapped operands, and
  // ignored by the SwiGLU and table-row epilogues
  {
    const auto forward = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
      return k.family == KernelFamily::kWgmma && k.mode == 1 && k.out == DType::kBF16 && k.lhs == DType::kBF16 &&
             k.bn == 256 && !k.b_k_major && !k.gather_a && !k.swiglu && !k.scatter_out && !k.split_tail &&
             !k.swap_ab && !k.tma_store && k.cluster == 1;
    });
    ASSERT_NE(forward, variants.end());
    ASSERT_EQ(forward->stages, 4);
    auto tma = override_variant(*forward, "epilogue=tma", hopper);
    ASSERT_TRUE(tma.ok()) << tma.status().to_string();
    EXPECT_TRUE(tma->tma_store);
    EXPECT_EQ(tma->stages, 3);  // beside the largest table
    EXPECT_EQ(tma->dynamic_smem_bytes(0, 0) - forward->dynamic_smem_bytes(0, 0),
              2 * 2 * 64 * 32 * 2 - (128 + 256) * 64 * 2);
    const std::string source = generate_source(*tma);
    EXPECT_NE(source.find("kTmaStore = true"), std::string::npos);
    EXPECT_NE(source.find("map_out"), std::string::npos);
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *tma) != variants.end()) << "CI does not compile " << tma->name();
    for (std::int64_t groups : {1, 8, 64, 128, 256, 300, 512}) {
      auto fit = override_variant(*forward, "epilogue=tma", hopper, compiled_table_for(groups));
      ASSERT_TRUE(fit.ok()) << groups << ": " << fit.status().to_string();
      EXPECT_EQ(fit->stages, 4) << groups;
      EXPECT_LE(fit->dynamic_smem_bytes(groups / 2, groups - groups / 2) + kWgmmaStaticSmemBytes, hopper.max_dynamic_smem)
          << groups << " groups: " << fit->name();
      EXPECT_TRUE(std::find(variants.begin(), variants.end(), *fit) != variants.end())
          << "CI does not compile " << fit->name();
    }
    EXPECT_EQ(*override_variant(*tma, "epilogue=direct", hopper), *forward);
    KernelVariant gathered16 = *forward;
    gathered16.gather_a = true;
    auto gathered_tma = override_variant(gathered16, "epilogue=tma", hopper, compiled_table_for(128));
    ASSERT_TRUE(gathered_tma.ok()) << gathered_tma.status().to_string();
    EXPECT_TRUE(gathered_tma->tma_store);
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *gathered_tma) != variants.end())
        << "CI does not compile " << gathered_tma->name();
    KernelVariant mixed = *forward;  // bf16 in, f16 out: not compiled in CI with it, so ignored
    mixed.out = DType::kF16;
    EXPECT_FALSE(override_variant(mixed, "epilogue=tma", hopper)->tma_store);
    for (auto own : {&KernelVariant::swiglu, &KernelVariant::scatter_out}) {
      KernelVariant k = *forward;
      k.*own = true;
      EXPECT_FALSE(override_variant(k, "epilogue=tma", hopper)->tma_store);
    }
    expect_rejected(*forward, {"epilogue=tma,cluster=2", "cluster=2n,epilogue=tma", "epilogue=tma,split=tail"},
                    "epilogue=tma");
    expect_rejected(*forward, {"epilogue=tma,swap=ab"}, "swapped operands");
  }
  // bm=192: the plain mode 1 tile on three consumer warpgroups (512 threads), 192 columns unless
  // bn says fewer; one CTA per tile, whole, the plain epilogue; ignored in mode 2; a swapped tile
  // leaves its swap for it
  {
    const auto forward = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
      return k.family == KernelFamily::kWgmma && k.mode == 1 && k.out == DType::kBF16 && k.lhs == DType::kBF16 &&
             k.bn == 256 && !k.b_k_major && !k.gather_a && !k.swiglu && !k.scatter_out && !k.split_tail &&
             !k.swap_ab && !k.tma_store && k.cluster == 1 && !k.overlap_store;
    });
    ASSERT_NE(forward, variants.end());
    auto three = override_variant(*forward, "bm=192", hopper);
    ASSERT_TRUE(three.ok()) << three.status().to_string();
    EXPECT_EQ(three->bm, 192);
    EXPECT_EQ(three->bn, 192);
    EXPECT_EQ(three->warps_m, 3);
    EXPECT_EQ(three->threads(), 512);
    EXPECT_EQ(three->stages, 4);  // 48 KiB stages, as 128 x 256's
    EXPECT_NE(three->name().find(" 192x192x64 "), std::string::npos) << three->name();
    const std::string source = generate_source(*three);
    EXPECT_NE(source.find("kConsumers = 3"), std::string::npos);
    EXPECT_NE(source.find("__launch_bounds__(512, 1)"), std::string::npos);
    EXPECT_NE(generate_source(*forward).find("__launch_bounds__(384, 1)"), std::string::npos);
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *three) != variants.end()) << "CI does not compile " << three->name();
    auto narrow = override_variant(*forward, "bn=128,bm=192", hopper);
    ASSERT_TRUE(narrow.ok()) << narrow.status().to_string();
    EXPECT_EQ(narrow->bn, 128);
    EXPECT_EQ(narrow->bm, 192);
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *narrow) != variants.end()) << "CI does not compile " << narrow->name();
    auto back = override_variant(*three, "bm=128", hopper);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->bm, 128);
    EXPECT_EQ(back->warps_m, 2);
    EXPECT_EQ(back->threads(), 384);
    auto no_overlap = override_variant(*forward, "overlap=on,bm=192", hopper);  // (two warpgroups' form only)
    ASSERT_TRUE(no_overlap.ok()) << no_overlap.status().to_string();
    EXPECT_FALSE(no_overlap->overlap_store);
    EXPECT_EQ(no_overlap->bm, 192);
    expect_rejected(*forward, {"bm=192,cluster=2", "cluster=2n,bm=192", "bm=192,split=tail", "bm=192,epilogue=tma",
                               "bm=192,bn=256"}, "bm=192");
    expect_rejected(*forward, {"bm=96", "bm=256", "bm="}, "RAGDOT_CUDA_VARIANT");
    KernelVariant gathered_rows = *forward;
    gathered_rows.gather_a = true;
    expect_rejected(gathered_rows, {"bm=192"}, "gathered rows");
    const auto mode2 = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
      return k.family == KernelFamily::kWgmma && k.mode == 2 && !k.strips;
    });
    ASSERT_NE(mode2, variants.end());
    EXPECT_EQ(*override_variant(*mode2, "bm=192", hopper), *mode2);
    const auto swapped = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) { return k.swap_ab; });
    ASSERT_NE(swapped, variants.end());
    auto unswapped = override_variant(*swapped, "bm=192", hopper);
    ASSERT_TRUE(unswapped.ok()) << unswapped.status().to_string();
    EXPECT_FALSE(unswapped->swap_ab);
    EXPECT_EQ(unswapped->bm, 192);
  }
  // n pairs load their whole B tiles: any bn
  v = override_variant(*wgmma, "cluster=2n,bn=192", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->cluster_along_n);
  EXPECT_TRUE(compile_to_cubin(generate_source(*v), "ragdot_kernel.cu", embedded_kernel_headers(), "sm_90a").ok());
  const auto gathered = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) { return k.gather_a; });
  ASSERT_NE(gathered, variants.end());
  EXPECT_EQ(*override_variant(*gathered, "cluster=2", hopper), *gathered);  // gathered rows pair along n only
  {
    const auto paired = override_variant(*gathered, "cluster=2n", hopper);
    ASSERT_TRUE(paired.ok()) << paired.status().to_string();
    EXPECT_TRUE(paired->pairs_along_n());
  }
  EXPECT_EQ(*override_variant(*simt, "cluster=2", hopper), *simt);
  // split=tail: the wgmma family's mode 1 (gathered rows too), one CTA per tile; elsewhere ignored
  v = override_variant(*wgmma, "split=tail", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->split_tail);
  EXPECT_EQ(v->stages, wgmma->stages);  // the partial sums live in the workspace, not in shared memory
  EXPECT_NE(v->name().find("splittail"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("kSplitTail = true"), std::string::npos);
  EXPECT_NE(generate_source(*wgmma).find("kSplitTail = false"), std::string::npos);
  EXPECT_FALSE(override_variant(*v, "split=off", hopper)->split_tail);
  EXPECT_TRUE(override_variant(*gathered, "split=tail", hopper)->split_tail);
  EXPECT_FALSE(override_variant(*mode2, "split=tail", hopper)->split_tail);  // mode 2: ignored
  EXPECT_EQ(*override_variant(*simt, "split=tail", hopper), *simt);
  // swap=ab: the wgmma family's plain mode 1 with 16-bit outputs: 160 token rows by 256 columns,
  // an instruction pair per N; elsewhere ignored; in CTA pairs along m only (cluster=2), not with
  // split tiles
  const auto plain16 = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
    return k.family == KernelFamily::kWgmma && k.mode == 1 && k.out == DType::kBF16 && k.bn == 256 && !k.gather_a &&
           !k.swiglu && !k.scatter_out && !k.split_tail && !k.swap_ab && k.cluster == 1;
  });
  ASSERT_NE(plain16, variants.end());
  v = override_variant(*plain16, "swap=ab", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->swap_ab);
  EXPECT_EQ(v->bm, 160);
  EXPECT_EQ(v->bn, 256);
  EXPECT_GE(v->stages, 3);
  EXPECT_NE(v->name().find("swapAB"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("wgmma.mma_async.sync.aligned.m64n16k16"), std::string::npos);
  EXPECT_NE(generate_source(*v).find("wgmma.mma_async.sync.aligned.m64n160k16"), std::string::npos);
  EXPECT_EQ(*override_variant(*v, "swap=off", hopper), *plain16);
  EXPECT_EQ(override_variant(*plain16, "bn=128,swap=ab", hopper).ok(), false);
  EXPECT_TRUE(override_variant(*plain16, "swap=ab,stages=2", hopper)->stages == 2);
  // a fourth stage where the op's scheduler table is small (an MoE layer's experts), not for the largest
  EXPECT_EQ(v->stages, 3);
  auto four = override_variant(*plain16, "swap=ab", hopper, /*groups=*/2 * 256);
  ASSERT_TRUE(four.ok()) << four.status().to_string();
  EXPECT_EQ(four->stages, 4);
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *four) != variants.end()) << "CI does not compile " << four->name();
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *v) != variants.end()) << "CI does not compile " << v->name();
  EXPECT_FALSE(override_variant(*plain16, "swap=ab,stages=4", hopper).ok());  // the largest table: no room
  EXPECT_TRUE(override_variant(*plain16, "swap=ab,stages=4", hopper, 2 * 256).ok());
  EXPECT_FALSE(override_variant(*gathered, "swap=ab", hopper)->swap_ab);  // gathered rows: ignored
  EXPECT_FALSE(override_variant(*mode2, "swap=ab", hopper)->swap_ab);     // mode 2: ignored
  KernelVariant f32_mode1 = *plain16;
  f32_mode1.out = DType::kF32;
  EXPECT_FALSE(override_variant(f32_mode1, "swap=ab", hopper)->swap_ab);  // f32 outputs: ignored
  expect_rejected(*plain16, {"swap=ba", "swap=", "swap=ab,cluster=2n", "swap=ab,cluster=4", "swap=ab,split=tail"},
                  "swap");
  // swapped tiles in m pairs, from a plain variant or the planner's swapped one (whose cluster=2
  // alone asks for plain pairs); CI compiles both table sizes' forms
  const KernelVariant swapped_v = *v;
  for (const KernelVariant* from : std::initializer_list<const KernelVariant*>{&*plain16, &swapped_v}) {
    auto pair = override_variant(*from, "swap=ab,cluster=2", hopper);
    ASSERT_TRUE(pair.ok()) << pair.status().to_string();
    EXPECT_TRUE(pair->swap_ab && pair->cluster == 2 && !pair->cluster_along_n && pair->bm == 160) << pair->name();
    EXPECT_EQ(pair->stages, v->stages);
    EXPECT_NE(pair->name().find("cluster2 swapAB"), std::string::npos) << pair->name();
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *pair) != variants.end()) << "CI does not compile " << pair->name();
    if (from == &swapped_v) continue;  // (a swapped variant keeps its stages)
    auto small_table = override_variant(*from, "swap=ab,cluster=2", hopper, 2 * 256);
    ASSERT_TRUE(small_table.ok()) << small_table.status().to_string();
    EXPECT_EQ(small_table->stages, 4);
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *small_table) != variants.end())
        << "CI does not compile " << small_table->name();
  }
  EXPECT_FALSE(override_variant(*v, "cluster=2", hopper)->swap_ab);
  // strips=on: the wgmma family's mode 2, a ring of A tiles beside 128 KiB of B's slots; 4 A tiles
  // beside the largest scheduler table, more beside an MoE layer's; elsewhere ignored, and no
  // combination with clusters
  v = override_variant(*mode2, "strips=on", hopper);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->strips);
  EXPECT_EQ(v->stages, 4);
  EXPECT_NE(v->name().find("strips"), std::string::npos) << v->name();
  EXPECT_NE(generate_source(*v).find("Strips<V, Mma>::run"), std::string::npos);
  EXPECT_NE(generate_source(*mode2).find("Kernel<V, Mma>::run"), std::string::npos);
  EXPECT_EQ(v->dynamic_smem_bytes(0, 0) - mode2->dynamic_smem_bytes(0, 0),
            4 * 128 * 64 * 2 + 128 * 1024 - mode2->stages * (128 + 256) * 64 * 2);
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *v) != variants.end()) << "CI does not compile " << v->name();
  auto deeper = override_variant(*mode2, "strips=on", hopper, /*groups=*/2 * 256);
  ASSERT_TRUE(deeper.ok()) << deeper.status().to_string();
  EXPECT_EQ(deeper->stages, 5);
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *deeper) != variants.end())
      << "CI does not compile " << deeper->name();
  EXPECT_EQ(*override_variant(*v, "strips=off", hopper), *mode2);
  // every table size: the ring, B's slots, the table, the pad and the static part fit the device
  for (std::int64_t groups : {1, 252, 253, 256, 320, 476, 477, 2000, 4349, 4572, 8192}) {
    auto fit = override_variant(*mode2, "strips=on", hopper, groups);
    ASSERT_TRUE(fit.ok()) << groups << ": " << fit.status().to_string();
    EXPECT_LE(fit->dynamic_smem_bytes(groups / 2, groups - groups / 2) + kWgmmaStaticSmemBytes, hopper.max_dynamic_smem)
        << groups << " groups: " << fit->name();
    EXPECT_GE(fit->stages, 4) << groups;
  }
  EXPECT_EQ(override_variant(*mode2, "strips=on,stages=3", hopper)->stages, 3);
  EXPECT_FALSE(override_variant(*mode2, "strips=on,stages=5", hopper).ok());  // the largest table: no room
  EXPECT_EQ(override_variant(*mode2, "bn=128,strips=on", hopper)->bn, 128);
  EXPECT_FALSE(override_variant(*plain16, "strips=on", hopper)->strips);  // mode 1: ignored
  EXPECT_EQ(*override_variant(*simt, "strips=on", hopper), *simt);
  expect_rejected(*mode2, {"strips=b", "strips=", "strips=on,cluster=2", "cluster=2n,strips=on"}, "strips");
  // strips with the TMA-store epilogue: its 32 KiB staging area after B's slots takes A tiles
  // from the ring (2 beside the largest table, 3 or 4 beside smaller ones), and fits every table
  auto stored = override_variant(*mode2, "epilogue=tma,strips=on", hopper);
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  EXPECT_TRUE(stored->strips && stored->tma_store) << stored->name();
  EXPECT_EQ(stored->stages, 2);
  EXPECT_EQ(stored->dynamic_smem_bytes(0, 0) - v->dynamic_smem_bytes(0, 0), 2 * 2 * 64 * 64 * 2 - 2 * 128 * 64 * 2);
  EXPECT_NE(generate_source(*stored).find("kTmaStore = true"), std::string::npos);
  EXPECT_NE(generate_source(*stored).find("map_out"), std::string::npos);
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *stored) != variants.end())
      << "CI does not compile " << stored->name();
  EXPECT_EQ(override_variant(*mode2, "epilogue=tma,strips=on", hopper, /*groups=*/2 * 256)->stages, 3);
  for (std::int64_t groups : {1, 64, 256, 476, 2000, 8192}) {
    auto fit = override_variant(*mode2, "strips=on,epilogue=tma", hopper, groups);
    ASSERT_TRUE(fit.ok()) << groups << ": " << fit.status().to_string();
    EXPECT_LE(fit->dynamic_smem_bytes(groups / 2, groups - groups / 2) + kWgmmaStaticSmemBytes, hopper.max_dynamic_smem)
        << groups << " groups: " << fit->name();
    EXPECT_GE(fit->stages, 2) << groups;
  }
  EXPECT_FALSE(override_variant(*mode2, "strips=on,epilogue=tma,stages=3", hopper).ok());  // the largest table
  // buffers=3: a third box in flight per warpgroup, 16 KiB more staging for one A tile fewer (256
  // groups); four leave strips no room for two A tiles; without epilogue=tma the key is ignored
  auto deeper_stores = override_variant(*mode2, "epilogue=tma,strips=on,buffers=3", hopper, /*groups=*/2 * 256);
  ASSERT_TRUE(deeper_stores.ok()) << deeper_stores.status().to_string();
  EXPECT_EQ(deeper_stores->store_buffers, 3);
  EXPECT_EQ(deeper_stores->stages, 2);
  EXPECT_NE(deeper_stores->name().find(" b3"), std::string::npos) << deeper_stores->name();
  EXPECT_EQ(deeper_stores->dynamic_smem_bytes(256, 256) -
                override_variant(*mode2, "epilogue=tma,strips=on", hopper, 2 * 256)->dynamic_smem_bytes(256, 256),
            2 * 64 * 64 * 2 - 128 * 64 * 2);
  EXPECT_LE(deeper_stores->dynamic_smem_bytes(256, 256) + kWgmmaStaticSmemBytes, hopper.max_dynamic_smem);
  EXPECT_NE(generate_source(*deeper_stores).find("kStoreBuffers = 3"), std::string::npos);
  {
    const auto out = compile_to_cubin(generate_source(*deeper_stores), "ragdot_kernel.cu", embedded_kernel_headers(),
                                      arch_for(hopper));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Resources r = resources_of(out->log);
    EXPECT_EQ(r.stack + r.spill_stores + r.spill_loads, 0) << out->log;
  }
  EXPECT_FALSE(override_variant(*mode2, "epilogue=tma,strips=on,buffers=4", hopper, 2 * 256).ok());
  auto plain_stores = override_variant(*mode2, "epilogue=tma,buffers=4", hopper);  // the plain mode 2 ring
  ASSERT_TRUE(plain_stores.ok()) << plain_stores.status().to_string();
  EXPECT_EQ(plain_stores->store_buffers, 4);
  EXPECT_GE(plain_stores->stages, 2);
  EXPECT_EQ(override_variant(*mode2, "buffers=3", hopper)->store_buffers, 2);
  EXPECT_NE(generate_source(*mode2).find("kStoreBuffers = 2"), std::string::npos);
  expect_rejected(*mode2, {"buffers=1", "buffers=5", "buffers=", "buffers=two"}, "buffers");
  auto mode2_f32 = *mode2;  // f32 outputs keep the register epilogue
  mode2_f32.out = DType::kF32;
  const auto stored_f32 = override_variant(mode2_f32, "strips=on,epilogue=tma", hopper);
  ASSERT_TRUE(stored_f32.ok()) << stored_f32.status().to_string();
  EXPECT_TRUE(stored_f32->strips && !stored_f32->tma_store) << stored_f32->name();
  // pingpong=on: turns of the consumer warpgroups, in strips only; leaving strips leaves the turns
  auto turns = override_variant(*mode2, "strips=on,pingpong=on", hopper);
  ASSERT_TRUE(turns.ok()) << turns.status().to_string();
  EXPECT_TRUE(turns->strips && turns->pingpong);
  EXPECT_EQ(turns->stages, v->stages);
  EXPECT_NE(turns->name().find("strips pingpong"), std::string::npos) << turns->name();
  EXPECT_NE(generate_source(*turns).find("kPingPong = true"), std::string::npos);
  EXPECT_NE(generate_source(*v).find("kPingPong = false"), std::string::npos);
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *turns) != variants.end())
      << "CI does not compile " << turns->name();
  auto turns_f32 = *turns;
  turns_f32.out = DType::kF32;
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), turns_f32) != variants.end())
      << "CI does not compile " << turns_f32.name();
  EXPECT_EQ(*override_variant(*turns, "pingpong=off", hopper), *v);
  EXPECT_EQ(*override_variant(*turns, "strips=off", hopper), *mode2);
  // the TMA-store epilogue keeps the strips and their turns; leaving strips leaves the turns
  const auto turns_stored = override_variant(*turns, "epilogue=tma", hopper);
  ASSERT_TRUE(turns_stored.ok()) << turns_stored.status().to_string();
  EXPECT_TRUE(turns_stored->strips && turns_stored->pingpong && turns_stored->tma_store) << turns_stored->name();
  EXPECT_TRUE(std::find(variants.begin(), variants.end(), *turns_stored) != variants.end())
      << "CI does not compile " << turns_stored->name();
  EXPECT_FALSE(override_variant(*turns, "epilogue=tma,strips=off", hopper)->pingpong);
  EXPECT_EQ(*override_variant(*plain16, "pingpong=on", hopper), *plain16);     // mode 1: ignored
  expect_rejected(*mode2, {"pingpong=on", "pingpong=yes", "pingpong="}, "pingpong");
  // overlap=on: the plain mode 1 epilogue with 16-bit outputs and [G, K, N] weights, on one CTA
  // or in pairs along n; elsewhere ignored, and a variant that leaves that epilogue leaves it
  const auto plain_kn = std::find_if(variants.begin(), variants.end(), [](const KernelVariant& k) {
    return k.family == KernelFamily::kWgmma && k.mode == 1 && k.out == DType::kBF16 && k.bn == 256 && !k.b_k_major &&
           !k.gather_a && !k.swiglu && !k.scatter_out && !k.split_tail && !k.swap_ab && !k.tma_store &&
           !k.overlap_store && k.cluster == 1;
  });
  ASSERT_NE(plain_kn, variants.end());
  auto overlapped = override_variant(*plain_kn, "overlap=on", hopper);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status().to_string();
  EXPECT_TRUE(overlapped->overlap_store);
  EXPECT_EQ(overlapped->stages, plain_kn->stages);
  EXPECT_NE(overlapped->name().find("overlapstore"), std::string::npos) << overlapped->name();
  EXPECT_NE(generate_source(*overlapped).find("kOverlapStore = true"), std::string::npos);
  EXPECT_NE(generate_source(*plain_kn).find("kOverlapStore = false"), std::string::npos);
  EXPECT_EQ(*override_variant(*overlapped, "overlap=off", hopper), *plain_kn);
  for (const char* spec : {"overlap=on", "overlap=on,bn=128", "overlap=on,cluster=2n", "overlap=on,cluster=2n,bn=128"}) {
    auto o = override_variant(*plain_kn, spec, hopper);
    ASSERT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
    EXPECT_TRUE(o->overlap_store) << spec;
    EXPECT_TRUE(std::find(variants.begin(), variants.end(), *o) != variants.end()) << "CI does not compile " << o->name();
  }
  for (const char* spec : {"overlap=on,cluster=2", "overlap=on,cluster=4", "overlap=on,swap=ab", "overlap=on,split=tail",
                           "overlap=on,epilogue=tma"})
    EXPECT_FALSE(override_variant(*plain_kn, spec, hopper)->overlap_store) << spec;
  EXPECT_FALSE(override_variant(*overlapped, "swap=ab", hopper)->overlap_store);  // leaves the plain epilogue
  EXPECT_EQ(*override_variant(*plain16, "overlap=on", hopper), *plain16);          // [G, N, K] weights: ignored
  EXPECT_EQ(*override_variant(*gathered, "overlap=on", hopper), *gathered);        // gathered rows: ignored
  EXPECT_EQ(*override_variant(*mode2, "overlap=on", hopper), *mode2);              // mode 2: ignored
  KernelVariant f32_kn = *plain_kn;
  f32_kn.out = DType::kF32;
  EXPECT_FALSE(override_variant(f32_kn, "overlap=on", hopper)->overlap_store);  // f32 outputs: ignored
  expect_rejected(*plain_kn, {"overlap=yes", "overlap="}, "overlap");
  // ctas: accepted here (the plan caps its grid with it)
  EXPECT_EQ(*override_variant(*wgmma, "ctas=8", hopper), *wgmma);
  expect_rejected(*wgmma, {"ctas=0", "ctas=-3", "ctas=", "ctas=many"}, "ctas");
  expect_rejected(*wgmma, {"split=2", "split=", "split=on", "split=tail,cluster=2", "cluster=2n,split=tail"}, "split");
}

// A canonical mode 1 problem: lhs [m, k] rows, weights [groups, k, n] (or [groups, n, k] with
// `nk`), out [m, n], all of type `t`.
core::GroupGemmProblem mode1_problem(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t groups, DType t,
                                     bool nk) {
  core::GroupGemmProblem p;
  p.mode = RaggedMode::kNonContracting;
  p.lhs_dtype = p.rhs_dtype = p.out_dtype = t;
  p.m = m, p.n = n, p.k = k;
  p.num_groups = p.computed_groups = groups;
  p.ragged_extent = m;
  p.lhs_m = k, p.lhs_k = 1;
  p.rhs_g = k * n;
  if (nk) p.rhs_k = 1, p.rhs_n = k;  // [E, N, K]
  else p.rhs_k = n, p.rhs_n = 1;     // [E, K, N]
  p.out_m = n, p.out_n = 1;
  return p;
}

// The planner's variant for `p`, which must be one that CI compiles (one of `all`).
KernelVariant compiled_choice(const core::GroupGemmProblem& p, const DeviceTraits& d,
                              const std::vector<KernelVariant>& all) {
  auto v = choose_variant(p, d);
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  if (!v.ok()) return KernelVariant{};
  EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name() << " is not compiled in CI";
  return *v;
}

// The planner swaps operands (out^T = W^T x^T, tiles of up to 160 token rows) for mode 1 ops of
// about one such tile's rows per group with wide weights (deepseek-v3's prefill), and nowhere
// else; an override that asks for what a swapped tile cannot take (split tiles, CTA pairs, the
// TMA-store epilogue, another tile width) gets the plain tile instead, as does swap=off; swap=ab
// with those keys is still an error. Every variant it picks is one CI compiles.
TEST(CudaCodegen, PlannerSwapsOperandsForAboutOneTileOfRowsPerGroup) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  auto problem = [](std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t groups, bool nk = false) {
    return mode1_problem(m, k, n, groups, DType::kBF16, nk);
  };
  const auto all = all_variants(hopper);
  auto chosen = [&](const core::GroupGemmProblem& p) { return compiled_choice(p, hopper, all); };
  // deepseek-v3 prefill at 4096 tokens: up, down, and the data gradient's [E, N, K] weights; f16
  for (const auto& p : {problem(32768, 7168, 4096, 256), problem(32768, 2048, 7168, 256),
                        problem(32768, 4096, 7168, 256, true), problem(256 * 96, 7168, 4096, 256),
                        problem(256 * 160, 7168, 4096, 256)}) {
    const KernelVariant v = chosen(p);
    EXPECT_TRUE(v.swap_ab) << v.name() << " for " << p.to_string();
    EXPECT_EQ(v.bm, 160);
    EXPECT_EQ(v.stages, 4) << v.name();  // a table of 512 groups leaves room for four
  }
  {
    auto f16 = problem(32768, 7168, 4096, 256);
    f16.lhs_dtype = f16.rhs_dtype = f16.out_dtype = DType::kF16;
    EXPECT_TRUE(chosen(f16).swap_ab);
  }
  // not: more rows per group (qwen3, mixtral, deepseek-v3 at 8192 tokens), decode, narrow or
  // short weights, f32 outputs, gathered rows, the fused epilogues
  for (const auto& p : {problem(65536, 2048, 1536, 128), problem(16384, 4096, 28672, 8), problem(65536, 7168, 4096, 256),
                        problem(1024, 7168, 4096, 256), problem(256 * 95, 7168, 4096, 256),
                        problem(256 * 161, 7168, 4096, 256), problem(32768, 7168, 512, 256),
                        problem(32768, 256, 4096, 256)}) {
    EXPECT_FALSE(chosen(p).swap_ab) << p.to_string();
  }
  auto deepseek = problem(32768, 7168, 4096, 256);
  {
    auto f32 = deepseek;
    f32.out_dtype = DType::kF32;
    EXPECT_FALSE(chosen(f32).swap_ab);
    auto gathered = deepseek;
    gathered.lhs_gather_rows = 4096;
    EXPECT_FALSE(chosen(gathered).swap_ab);
    auto swiglu = deepseek;
    swiglu.swiglu_epilogue = true;
    swiglu.out_m = 2048;
    EXPECT_FALSE(chosen(swiglu).swap_ab);
  }
  // overrides of a swapped choice
  const KernelVariant v = chosen(deepseek);
  ASSERT_TRUE(v.swap_ab);
  const std::int64_t table = compiled_table_for(512);
  for (const char* spec : {"swap=off", "split=tail", "cluster=2", "cluster=2n", "epilogue=tma", "bn=128"}) {
    const auto o = override_variant(v, spec, hopper, table);
    ASSERT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
    EXPECT_FALSE(o->swap_ab) << spec;
    EXPECT_EQ(o->bm, 128) << spec;
    EXPECT_NE(std::find(all.begin(), all.end(), *o), all.end()) << spec << ": " << o->name() << " is not compiled in CI";
  }
  // (and the same keys on the planner's swapped tiles of both 16-bit types and weight layouts)
  for (DType t : {DType::kBF16, DType::kF16})
    for (bool nk : {false, true}) {
      const KernelVariant s = chosen(mode1_problem(32768, 7168, 4096, 256, t, nk));
      ASSERT_TRUE(s.swap_ab) << s.name();
      for (const char* spec : {"swap=off", "split=tail", "cluster=2", "cluster=2n", "epilogue=tma", "bn=128"}) {
        const auto o = override_variant(s, spec, hopper, table);
        ASSERT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
        EXPECT_NE(std::find(all.begin(), all.end(), *o), all.end()) << spec << ": " << o->name() << " is not compiled in CI";
      }
    }
  EXPECT_TRUE(override_variant(v, "split=tail", hopper, table)->split_tail);
  EXPECT_EQ(override_variant(v, "cluster=2", hopper, table)->cluster, 2);
  EXPECT_TRUE(override_variant(v, "epilogue=tma", hopper, table)->tma_store);
  EXPECT_EQ(override_variant(v, "bn=128", hopper, table)->bn, 128);
  EXPECT_EQ(*override_variant(v, "swap=ab", hopper, table), v);
  EXPECT_EQ(*override_variant(v, "split=off,order=mix", hopper, table), v);
  EXPECT_EQ(*override_variant(v, "bn=256", hopper, table), v);  // keys that restate the choice
  EXPECT_EQ(*override_variant(v, "epilogue=direct", hopper, table), v);
  EXPECT_EQ(override_variant(v, "stages=3", hopper, table)->stages, 3);
  EXPECT_TRUE(override_variant(v, "stages=3", hopper, table)->swap_ab);
  for (const char* bad : {"swap=ab,split=tail", "swap=ab,cluster=2n", "swap=ab,cluster=4", "swap=ab,bn=128",
                          "swap=ab,epilogue=tma"})
    EXPECT_FALSE(override_variant(v, bad, hopper, table).ok()) << bad;
  // swapped tiles in m pairs: the choice's stages, a kernel CI compiles
  const auto pairs = override_variant(v, "swap=ab,cluster=2", hopper, table);
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  EXPECT_TRUE(pairs->swap_ab && pairs->cluster == 2 && pairs->stages == v.stages) << pairs->name();
  EXPECT_NE(std::find(all.begin(), all.end(), *pairs), all.end()) << pairs->name() << " is not compiled in CI";
}

// Gathered rows (the MoE layer's up projection reading x through the sort's index) run in CTA
// pairs along n where n has columns for both CTAs of a 256-wide pair tile and the outputs are of
// the input type: each CTA gathers half of the rows and sends them to the other. One CTA per tile
// elsewhere, and under the keys that run a tile on one CTA; cluster=1 and 2n choose, cluster=2
// and 4 leave the choice as it is. Every such choice is a kernel CI compiles.
TEST(CudaCodegen, PlannerPairsGatheredRowsAlongN) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  auto problem = [](std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t groups, DType t, bool nk = false) {
    core::GroupGemmProblem p = mode1_problem(m, k, n, groups, t, nk);
    p.lhs_gather_rows = m / 8;
    return p;
  };
  const auto all = all_variants(hopper);
  auto chosen = [&](const core::GroupGemmProblem& p) {
    auto v = choose_variant(p, hopper);
    EXPECT_TRUE(v.ok()) << v.status().to_string();
    if (!v.ok()) return KernelVariant{};
    EXPECT_TRUE(v->gather_a) << v->name();
    EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name() << " is not compiled in CI";
    return *v;
  };
  // qwen3-30b-a3b, mixtral and deepseek-v3 up projections, both weight layouts and 16-bit types,
  // and the narrowest n that pairs
  for (DType t : {DType::kBF16, DType::kF16})
    for (bool nk : {false, true})
      for (const auto& p : {problem(32768, 2048, 1536, 128, t, nk), problem(8192, 4096, 28672, 8, t, nk),
                            problem(32768, 7168, 4096, 256, t, nk), problem(1000, 192, 264, 4, t, nk)}) {
        const KernelVariant v = chosen(p);
        EXPECT_EQ(v.cluster, 2) << v.name() << " for " << p.to_string();
        EXPECT_TRUE(v.cluster_along_n) << v.name();
        EXPECT_GE(v.stages, 3) << v.name();
        EXPECT_FALSE(v.swap_ab) << v.name();
      }
  {
    auto swiglu = problem(32768, 2048, 1536, 128, DType::kBF16);
    swiglu.swiglu_epilogue = true;
    swiglu.out_m = 768;
    const KernelVariant v = chosen(swiglu);
    EXPECT_TRUE(v.swiglu);
    EXPECT_TRUE(v.pairs_along_n()) << v.name();
  }
  // one CTA: n within one tile, an odd number of column tiles (qwen3-30b-a3b's 768-column data
  // gradient on dy's gathered rows; a pair would leave a CTA without columns in every row block),
  // f32 outputs, rows added into a table
  {
    EXPECT_EQ(chosen(problem(1000, 192, 256, 4, DType::kBF16)).cluster, 1);
    EXPECT_EQ(chosen(problem(1000, 192, 200, 4, DType::kBF16)).cluster, 1);
    EXPECT_EQ(chosen(problem(32768, 2048, 768, 128, DType::kBF16, true)).cluster, 1);
    EXPECT_EQ(chosen(problem(1000, 192, 1032, 4, DType::kBF16)).cluster, 1);  // five tiles
    EXPECT_EQ(chosen(problem(1000, 192, 776, 4, DType::kBF16)).cluster, 2);   // four, the last 8 wide
    auto f32 = problem(32768, 2048, 1536, 128, DType::kBF16);
    f32.out_dtype = DType::kF32;
    EXPECT_EQ(chosen(f32).cluster, 1);
    auto scatter = problem(32768, 768, 2048, 128, DType::kBF16);
    scatter.out_scatter_rows = true;
    EXPECT_EQ(chosen(scatter).cluster, 1);
  }
  // overrides
  const KernelVariant v = chosen(problem(32768, 2048, 1536, 128, DType::kBF16));
  const std::int64_t table = compiled_table_for(256);
  auto apply = [&](const char* spec) {
    const auto o = override_variant(v, spec, hopper, table);
    EXPECT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
    return o.ok() ? *o : KernelVariant{};
  };
  const KernelVariant one = apply("cluster=1");
  EXPECT_EQ(one.cluster, 1);
  EXPECT_TRUE(one.gather_a);
  EXPECT_NE(std::find(all.begin(), all.end(), one), all.end()) << one.name() << " is not compiled in CI";
  EXPECT_EQ(apply("cluster=2n"), v);
  EXPECT_EQ(apply("cluster=2"), v);  // gathered rows pair only along n
  EXPECT_EQ(apply("cluster=4"), v);
  for (const char* spec : {"split=tail", "epilogue=tma"}) {
    const KernelVariant o = apply(spec);
    EXPECT_EQ(o.cluster, 1) << spec;
    EXPECT_NE(std::find(all.begin(), all.end(), o), all.end()) << spec << ": " << o.name() << " is not compiled in CI";
  }
  EXPECT_FALSE(override_variant(v, "cluster=2n,split=tail", hopper, table).ok());
  EXPECT_EQ(apply("cluster=2,split=tail").cluster, 1);  // cluster=2 does not ask for the pair
  EXPECT_FALSE(override_variant(v, "stages=2", hopper, table).ok()) << "pairs run with three stages or more";
  EXPECT_EQ(apply("stages=2,cluster=1").stages, 2);
  EXPECT_EQ(apply("stages=3").stages, 3);
  {
    // the TMA-store epilogue does not apply to the SwiGLU epilogue: the pair stays
    auto swiglu = problem(32768, 2048, 1536, 128, DType::kBF16);
    swiglu.swiglu_epilogue = true;
    swiglu.out_m = 768;
    const KernelVariant s = chosen(swiglu);
    const auto o = override_variant(s, "epilogue=tma", hopper, table);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_EQ(*o, s);
  }
  // measured plans time the other form
  const auto candidates = candidate_variants(problem(32768, 2048, 1536, 128, DType::kBF16), hopper, v);
  EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(),
                          [](const Candidate& c) { return c.spec == "cluster=1" && c.variant.cluster == 1; }));
  EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [](const Candidate& c) {
    return c.variant.bn == 128 && c.variant.cluster == 1 && c.variant.gather_a;
  })) << "the narrower gathered tile is not timed";
  const auto from_one = candidate_variants(problem(32768, 2048, 1536, 128, DType::kBF16), hopper, one);
  EXPECT_TRUE(std::any_of(from_one.begin(), from_one.end(),
                          [](const Candidate& c) { return c.spec == "cluster=2n" && c.variant.cluster == 2; }));
}

// The weight gradient on gathered rows (mode 2, lhs [K, M] read through an index of its K rows:
// an MoE layer's up projection that read x through the sort's index): the Hopper family's mode 2
// tile on one CTA with the rows copied by cp.async, as CI compiles it; keys it cannot take
// (clusters, strips, the TMA-store epilogue) are errors, and measured plans time only the other
// tile width.
TEST(CudaCodegen, PlannerGathersTheWeightGradientsRows) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  const auto all = all_variants(hopper);
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (std::int64_t n : {std::int64_t(1536), std::int64_t(200)}) {
      core::GroupGemmProblem p;
      p.mode = RaggedMode::kContracting;
      p.lhs_dtype = p.rhs_dtype = p.out_dtype = t;
      p.m = 2048, p.n = n, p.k = 32768;
      p.num_groups = p.computed_groups = 128;
      p.ragged_extent = p.k;
      p.lhs_m = 1, p.lhs_k = p.m;
      p.rhs_k = n, p.rhs_n = 1;
      p.out_g = p.m * n, p.out_m = n, p.out_n = 1;
      p.lhs_gather_rows = 4096;
      const auto v = choose_variant(p, hopper);
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      EXPECT_TRUE(v->gather_a && v->mode == 2 && v->cluster == 1 && !v->strips && !v->tma_store) << v->name();
      EXPECT_NE(v->name().find("mode2"), std::string::npos) << v->name();
      EXPECT_NE(std::find(all.begin(), all.end(), *v), all.end()) << v->name() << " is not compiled in CI";
      const std::int64_t table = compiled_table_for(256);
      for (const char* spec : {"cluster=2n", "strips=on", "epilogue=tma"})
        EXPECT_FALSE(override_variant(*v, spec, hopper, table).ok()) << spec;
      const auto same = override_variant(*v, "cluster=2", hopper, table);  // gathered rows pair along n only
      ASSERT_TRUE(same.ok()) << same.status().to_string();
      EXPECT_EQ(*same, *v);
      const auto candidates = candidate_variants(p, hopper, *v);
      EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(),
                              [&](const Candidate& c) { return c.variant.bn != v->bn; }))
          << "the other tile width is not timed";
      for (const Candidate& c : candidates) {
        EXPECT_TRUE(c.variant.gather_a && c.variant.mode == 2 && c.variant.cluster == 1 && !c.variant.strips &&
                    !c.variant.tma_store)
            << c.spec << ": " << c.variant.name();
      }
      // off Hopper the backend says it does not gather
      EXPECT_FALSE(choose_variant(p, DeviceTraits{8, 0, 163 * 1024}).ok());
    }
  }
}

// The weight gradient goes in strips (B kept in shared memory across a strip of output tiles)
// where its groups are small enough for B to stay resident: deepseek-v3's 128 rows per group,
// bf16 in and out, and nowhere else (mixtral's large groups, f16 or f32 outputs, one m tile,
// gathered rows). Keys strips cannot take ask for the plain kernel, as does strips=off; measured
// plans time the plain kernel beside it. Every variant picked is one CI compiles.
TEST(CudaCodegen, PlannerRunsSmallGroupsWeightGradientsInStrips) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  const auto all = all_variants(hopper);
  auto problem = [](std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t groups, DType t = DType::kBF16) {
    core::GroupGemmProblem p;
    p.mode = RaggedMode::kContracting;
    p.lhs_dtype = p.rhs_dtype = p.out_dtype = t;
    p.m = m, p.n = n, p.k = k;
    p.num_groups = p.computed_groups = groups;
    p.ragged_extent = p.k;
    p.lhs_m = 1, p.lhs_k = p.m;  // x^T: the token rows are k
    p.rhs_k = n, p.rhs_n = 1;
    p.out_g = p.m * n, p.out_m = n, p.out_n = 1;
    return p;
  };
  auto chosen = [&](const core::GroupGemmProblem& p) { return compiled_choice(p, hopper, all); };
  // deepseek-v3's up and down projections at 4096 tokens, groups of up to 192 rows, 8 groups
  // (8 x 2 strips x 32 column tiles), 32 local groups of 128 rows past a group offset
  auto offset = problem(7168, 4096, 32 * 128, 256);
  offset.has_group_offset = true;
  offset.computed_groups = 32;
  for (const auto& p : {problem(7168, 4096, 32768, 256), problem(2048, 7168, 32768, 256),
                        problem(7168, 4096, 192 * 256, 256), problem(4096, 8192, 8 * 100, 8), offset}) {
    const KernelVariant v = chosen(p);
    EXPECT_TRUE(v.strips && v.mode == 2 && v.bn == 256 && v.cluster == 1 && !v.tma_store) << v.name() << " for " << p.to_string();
    EXPECT_NE(generate_source(v).find("Strips<V, Mma>::run"), std::string::npos);
    const std::int64_t table = compiled_table_for(p.num_groups + p.computed_groups);
    for (const char* spec : {"strips=off", "cluster=2", "cluster=2n"}) {
      const auto o = override_variant(v, spec, hopper, table);
      ASSERT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
      EXPECT_FALSE(o->strips) << spec;
      EXPECT_NE(std::find(all.begin(), all.end(), *o), all.end()) << spec << ": " << o->name() << " is not compiled in CI";
    }
    // the TMA-store epilogue keeps the strips, its staging area after B's slots and a shallower
    // A ring; strips=off then gives the plain ring with that epilogue
    for (const char* spec : {"epilogue=tma", "strips=on,epilogue=tma", "epilogue=tma,pingpong=on"}) {
      const auto o = override_variant(v, spec, hopper, table);
      ASSERT_TRUE(o.ok()) << spec << ": " << o.status().to_string();
      EXPECT_TRUE(o->strips && o->tma_store) << spec << ": " << o->name();
      EXPECT_LT(o->stages, v.stages) << spec;
      EXPECT_GE(o->stages, 2) << spec;
      EXPECT_NE(std::find(all.begin(), all.end(), *o), all.end()) << spec << ": " << o->name() << " is not compiled in CI";
    }
    const auto plain_tma = override_variant(v, "epilogue=tma,strips=off", hopper, table);
    ASSERT_TRUE(plain_tma.ok()) << plain_tma.status().to_string();
    EXPECT_TRUE(!plain_tma->strips && plain_tma->tma_store) << plain_tma->name();
    EXPECT_NE(std::find(all.begin(), all.end(), *plain_tma), all.end()) << plain_tma->name() << " is not compiled in CI";
    EXPECT_FALSE(override_variant(v, "strips=on,cluster=2", hopper, table).ok());
    const auto direct = override_variant(v, "epilogue=direct", hopper, table);  // the default: no change
    ASSERT_TRUE(direct.ok()) << direct.status().to_string();
    EXPECT_EQ(*direct, v);
    const auto narrow = override_variant(v, "bn=192", hopper, table);  // still strips, its own ring
    ASSERT_TRUE(narrow.ok()) << narrow.status().to_string();
    EXPECT_TRUE(narrow->strips);
    const auto narrow_again = override_variant(v, "strips=off,bn=192,strips=on", hopper, table);
    ASSERT_TRUE(narrow_again.ok()) << narrow_again.status().to_string();
    EXPECT_EQ(*narrow, *narrow_again);
    const auto candidates = candidate_variants(p, hopper, v);
    EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [](const Candidate& c) { return !c.variant.strips; }))
        << "the plain kernel is not timed beside strips";
    EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.variant.bn == 128; }))
        << "the narrower tile is not timed";
  }
  // not: larger groups (mixtral, 193 rows), f16 and f32 outputs, one m tile, narrow n, gathered rows
  auto f16 = problem(7168, 4096, 32768, 256, DType::kF16);
  auto f32_out = problem(7168, 4096, 32768, 256);
  f32_out.out_dtype = DType::kF32;
  auto gathered = problem(7168, 4096, 32768, 256);
  gathered.lhs_gather_rows = 4096;
  // ... nor too few strips to fill the GPU (8 groups of 128 rows, 2048 x 1024: 32 strips), nor
  // with a group offset where the local groups' rows are many (32 of 256 groups, 1024 rows each)
  auto local = problem(7168, 4096, 32768, 256);
  local.has_group_offset = true;
  local.computed_groups = 32;
  for (const auto& p : {problem(4096, 28672, 16384, 8), problem(7168, 4096, 193 * 256, 256), f16, f32_out,
                        problem(128, 4096, 32768, 256), problem(7168, 128, 32768, 256), gathered,
                        problem(2048, 1024, 8 * 128, 8), local}) {
    const KernelVariant v = chosen(p);
    EXPECT_FALSE(v.strips) << v.name() << " for " << p.to_string();
  }
  // "enough strips" counts the device's SMs: 8 groups of 100 rows at 4096 x 8192 make 512 strips,
  // two per SM of a 256-SM device but not of a 300-SM one
  const auto few_groups = problem(4096, 8192, 8 * 100, 8);
  for (const int sms : {256, 300}) {
    const DeviceTraits device{9, 0, 227 * 1024, sms};
    EXPECT_EQ(compiled_choice(few_groups, device, all).strips, sms == 256) << sms << " SMs";
  }
}

// The mixed tile order (kernels/ragdot/tile_order.h): opt-in (it did not pay on the GPU), for the
// wgmma family's mode 1 up to what its packed table holds; `order=plain|auto|mix`; other families
// and modes never take it; the key parses.
TEST(CudaCodegen, MixedOrderIsOptIn) {
  const DeviceTraits hopper{9, 0, 227 * 1024};
  auto problem = [](std::int64_t m, std::int64_t n, std::int64_t groups) {
    core::GroupGemmProblem p;
    p.mode = RaggedMode::kNonContracting;
    p.lhs_dtype = p.rhs_dtype = p.out_dtype = DType::kBF16;
    p.m = m, p.n = n, p.k = 7168;
    p.num_groups = p.computed_groups = groups;
    p.ragged_extent = m;
    p.lhs_m = p.k, p.lhs_k = 1;
    p.rhs_g = p.k * n, p.rhs_k = n, p.rhs_n = 1;  // [E, K, N]
    p.out_m = n, p.out_n = 1;
    return p;
  };
  const core::GroupGemmProblem deepseek = problem(32768, 4096, 256), mixtral = problem(16384, 28672, 8);
  auto chosen = choose_variant(deepseek, hopper);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  ASSERT_EQ(chosen->family, KernelFamily::kWgmma);
  EXPECT_EQ(tile_order(*chosen, deepseek, std::nullopt), RAGDOT_ORDER_PLAIN);  // opt-in: it did not pay
  EXPECT_EQ(tile_order(*chosen, deepseek, RAGDOT_ORDER_AUTO), RAGDOT_ORDER_AUTO);
  EXPECT_EQ(tile_order(*chosen, deepseek, RAGDOT_ORDER_PLAIN), RAGDOT_ORDER_PLAIN);
  EXPECT_EQ(tile_order(*chosen, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_MIX);
  EXPECT_EQ(tile_order(*chosen, mixtral, std::nullopt), RAGDOT_ORDER_PLAIN);
  EXPECT_EQ(tile_order(*chosen, mixtral, RAGDOT_ORDER_MIX), RAGDOT_ORDER_MIX);
  EXPECT_EQ(tile_order(*chosen, problem(32768, 4096, 31), RAGDOT_ORDER_AUTO), RAGDOT_ORDER_AUTO);
  // past the packed table: the plain order, even when asked
  EXPECT_EQ(tile_order(*chosen, problem(32768, 4096, RAGDOT_ORDER_MAX_GROUPS), RAGDOT_ORDER_MIX), RAGDOT_ORDER_MIX);
  EXPECT_EQ(tile_order(*chosen, problem(32768, 4096, RAGDOT_ORDER_MAX_GROUPS + 1), RAGDOT_ORDER_MIX),
            RAGDOT_ORDER_PLAIN);
  EXPECT_EQ(tile_order(*chosen, problem(std::int64_t(1) << 26, 4096, 256), RAGDOT_ORDER_MIX),
            RAGDOT_ORDER_PLAIN);  // too many tiles
  // (the planner swaps deepseek-v3's operands: tiles of 160 token rows) and the plain tile
  const std::int64_t table = compiled_table_for(512);
  EXPECT_TRUE(chosen->swap_ab);
  auto plain = override_variant(*chosen, "swap=off", hopper, table);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(tile_order(*plain, deepseek, RAGDOT_ORDER_AUTO), RAGDOT_ORDER_AUTO);
  // CTA pairs along n hand out 128 x 512 tiles, in the mixed order too; pairs along m cut their
  // tiles from all the groups' m tiles in order (schedule.cuh's kPairRows), in the plain order only
  auto pairs = override_variant(*chosen, "cluster=2n", hopper, table);
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  EXPECT_EQ(tile_order(*pairs, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_MIX);
  auto m_pairs = override_variant(*chosen, "cluster=2", hopper, table);
  ASSERT_TRUE(m_pairs.ok()) << m_pairs.status().to_string();
  EXPECT_TRUE(m_pairs->pairs_across_groups());
  EXPECT_EQ(tile_order(*m_pairs, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_PLAIN);
  auto quads = override_variant(*chosen, "cluster=4", hopper, table);
  ASSERT_TRUE(quads.ok()) << quads.status().to_string();
  EXPECT_FALSE(quads->pairs_across_groups());
  EXPECT_EQ(tile_order(*quads, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_MIX);
  // mode 2 and the mma.sync family hand out tiles in their own order
  KernelVariant other = *chosen;
  other.mode = 2;
  EXPECT_EQ(tile_order(other, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_PLAIN);
  auto mma = choose_variant(deepseek, DeviceTraits{8, 0, 163 * 1024});
  ASSERT_TRUE(mma.ok());
  ASSERT_NE(mma->family, KernelFamily::kWgmma);
  EXPECT_EQ(tile_order(*mma, deepseek, RAGDOT_ORDER_MIX), RAGDOT_ORDER_PLAIN);
  // the key
  EXPECT_EQ(parse_variant_spec("order=mix")->tile_order, std::optional<int>(RAGDOT_ORDER_MIX));
  EXPECT_EQ(parse_variant_spec("order=auto")->tile_order, std::optional<int>(RAGDOT_ORDER_AUTO));
  EXPECT_EQ(parse_variant_spec("order=plain")->tile_order, std::optional<int>(RAGDOT_ORDER_PLAIN));
  EXPECT_FALSE(parse_variant_spec("")->tile_order.has_value());
  for (const char* bad : {"order=", "order=sorted", "order=1"}) {
    const auto r = parse_variant_spec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("order"), std::string::npos) << r.status().message();
  }
  // a plan property, not a kernel's: the override leaves the variant as it is
  EXPECT_EQ(*override_variant(*chosen, "order=plain", hopper, table), *chosen);
}

// The Hopper variants must really run on the wgmma tensor-core path (HGMMA in the machine code),
// load through TMA (UTMALDG), wait on mbarriers (SYNCS), keep registers out of local memory, and
// have setmaxnreg honoured (ptxas warns with C7508 when it is not).
// What one Hopper variant's machine code must show (an empty string when it does).
std::string hopper_sass_failures(const KernelVariant& v, const std::string& log, const std::string& sass) {
  std::string f;
  const auto expect = [&](bool ok, const std::string& what) {
    if (!ok) f += "\n  " + what;
  };
  expect(log.find("C7508") == std::string::npos, "setmaxnreg ignored");
  expect(log.find("C7520") == std::string::npos, "wgmma pipeline serialized");
  // the static shared memory the stage counts leave room for (the device's limit counts it too)
  const std::size_t entry = log.find("'ragdot_group_gemm'");
  const std::size_t used = entry == std::string::npos ? entry : log.find(" bytes smem", entry);
  if (used == std::string::npos) return f + "\n  no ptxas report of ragdot_group_gemm\n" + log;
  const std::size_t number = log.find_last_of(' ', used - 1) + 1;
  expect(std::stoll(log.substr(number, used - number)) <= kWgmmaStaticSmemBytes, "static shared memory over budget");
  if (sass.find("ragdot_group_gemm") == std::string::npos) return f + "\n  no SASS: " + sass.substr(0, 500);
  expect(sass.find("HGMMA") != std::string::npos, "no HGMMA in the SASS");
  expect(sass.find("UTMALDG") != std::string::npos, "no TMA load in the SASS");
  expect(sass.find("SYNCS") != std::string::npos, "no mbarrier wait in the SASS");
  // CTA pairs: B (m pairs, 3-D boxes) and/or A (n pairs, 2-D boxes) through TMA multicast, a
  // cluster barrier around the kernel; one-CTA variants neither. Gathered rows in n pairs: no
  // multicast, each CTA's gathered half sent to the other by a shared-to-shared bulk copy.
  const bool gathered_pair = v.gather_a && v.cluster > 1;
  expect((sass.find("UTMALDG.3D.MULTICAST") != std::string::npos) == v.pairs_along_m(), "B multicast");
  expect((sass.find("UTMALDG.2D.MULTICAST") != std::string::npos) == (v.pairs_along_n() && !gathered_pair),
         "A multicast");
  expect((sass.find(".MULTICAST") != std::string::npos) == (v.cluster > 1 && !gathered_pair), "multicast");
  expect((sass.find("UBLKCP.S.S") != std::string::npos) == gathered_pair, "rows sent to the other CTA");
  // the TMA-store epilogue stores through TMA (UTMASTG); the others from registers only
  expect((sass.find("UTMASTG") != std::string::npos) == v.tma_store, "TMA stores");
  // rows added into a table: 16-byte f32 vector reductions, and no plain stores of the product
  expect((sass.find("REDG.E.ADD.F32x4") != std::string::npos) == v.scatter_out, "vector reductions");
  expect((sass.find("UCGABAR_WAIT") != std::string::npos) == (v.cluster > 1), "cluster barrier");
  expect(sass.find("LDL") == std::string::npos, "local-memory loads in the SASS");
  expect(sass.find("STL") == std::string::npos, "local-memory stores in the SASS");
  return f;
}

// Every variant of the Hopper family (all output types), compiled and disassembled in worker
// threads: the machine code must use wgmma, TMA and mbarriers, and never local memory.
TEST(CudaCodegen, HopperVariantsUseWgmmaAndTma) {
  const std::string cuobjdump = find_cuobjdump();
  ASSERT_FALSE(cuobjdump.empty()) << "cuobjdump not found: pip install nvidia-cuda-cuobjdump, or set RAGDOT_CUOBJDUMP";
  const DeviceTraits h{9, 0, 227 * 1024};
  std::vector<KernelVariant> hopper;
  for (const auto& v : all_variants(h))
    if (v.family == KernelFamily::kWgmma) hopper.push_back(v);
  std::vector<std::string> failures(hopper.size());
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      const fs::path cubin = fs::temp_directory_path() /
                             ("ragdot-sass-" + std::to_string(::getpid()) + "-" + std::to_string(w) + ".cubin");
      for (std::size_t i = w; i < hopper.size(); i += workers) {
        const auto out =
            compile_to_cubin(generate_source(hopper[i]), "ragdot_kernel.cu", embedded_kernel_headers(), arch_for(h));
        if (!out.ok()) {
          failures[i] = out.status().message();
          continue;
        }
        {
          std::ofstream f(cubin, std::ios::binary);
          f.write(out->cubin.data(), std::streamsize(out->cubin.size()));
        }
        failures[i] = hopper_sass_failures(hopper[i], out->log, run_and_capture("'" + cuobjdump + "' -sass '" + cubin.string() + "' 2>&1"));
      }
      fs::remove(cubin);
    });
  }
  for (auto& t : pool) t.join();
  int pairs = 0, tma_stores = 0, scatters = 0, strips = 0, f16_out = 0, f32_out = 0;
  for (std::size_t i = 0; i < hopper.size(); ++i) {
    const KernelVariant& v = hopper[i];
    EXPECT_TRUE(failures[i].empty()) << v.name() << ":" << failures[i];
    pairs += v.cluster > 1;
    tma_stores += v.tma_store;
    scatters += v.scatter_out;
    strips += v.strips;
    f16_out += v.out == DType::kF16;
    f32_out += v.out == DType::kF32;
  }
  EXPECT_GE(pairs, 9);        // along m, n and both: mode 1 with both weight layouts, mode 2
  EXPECT_GE(tma_stores, 2);   // both tile widths
  EXPECT_GE(scatters, 8);     // both tile widths, both weight layouts, with and without gathered rows
  EXPECT_GE(strips, 2);       // weight-gradient strips beside the largest scheduler table and a small one
  EXPECT_GE(f16_out, 1);      // every output type's machine code, not only bf16's
  EXPECT_GE(f32_out, 1);
}

class CacheDir {
 public:
  CacheDir() {
    path_ = fs::temp_directory_path() / ("ragdot-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(n_++));
    fs::remove_all(path_);
    setenv("RAGDOT_CACHE_DIR", path_.c_str(), 1);
  }
  ~CacheDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(path_ / "kernels", fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
    unsetenv("RAGDOT_CACHE_DIR");
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int n_ = 0;
};

const std::string kArch = "sm_80";
std::string small_source() {
  KernelVariant v;  // the simt family compiles fastest
  v.family = KernelFamily::kSimt;
  v.lhs = v.rhs = v.out = DType::kF32;
  v.bm = v.bn = 64, v.bk = 16, v.tm = v.tn = 4, v.warps_m = v.warps_n = 0, v.stages = 1;
  return generate_source(v);
}

TEST(KernelCache, PublishesThenLoadsFromDisk) {
  CacheDir dir;
  auto& cache = KernelCache::instance();
  const std::string src = small_source() + "// publish\n";
  const auto before = cache.stats();
  auto first = cache.get(src, "k.cu", kArch);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ((*first)->origin, CompiledKernel::Origin::kCompiled);
  const std::string path = cache.entry_path((*first)->key);
  EXPECT_TRUE(fs::exists(path));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "temporary file left behind: " << e.path();
  auto again = cache.get(src, "k.cu", kArch);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->origin, CompiledKernel::Origin::kMemory);
  cache.clear_memory();
  auto disk = cache.get(src, "k.cu", kArch);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ((*disk)->origin, CompiledKernel::Origin::kDisk);
  EXPECT_EQ((*disk)->cubin, (*first)->cubin);
  EXPECT_EQ(cache.stats().compiles, before.compiles + 1);
}

TEST(KernelCache, CorruptEntryIsRecompiledNotTrusted) {
  CacheDir dir;
  auto& cache = KernelCache::instance();
  const std::string src = small_source() + "// corrupt\n";
  auto first = cache.get(src, "k.cu", kArch);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string path = cache.entry_path((*first)->key);
  for (int damage = 0; damage < 3; ++damage) {
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      ASSERT_TRUE(f);
      if (damage == 0) {  // flip a byte in the middle of the cubin (the entry ends with the log)
        const std::size_t from_end = (*first)->log.size() + (*first)->cubin.size() / 2;
        f.seekg(-std::streamoff(from_end), std::ios::end);
        const char was = char(f.get());
        f.seekp(-std::streamoff(from_end), std::ios::end);
        f.put(char(was ^ 0x5a));
      } else if (damage == 1) {  // wrong magic
        f.seekp(0);
        f.put('X');
      }
    }
    if (damage == 2) fs::resize_file(path, fs::file_size(path) / 2);  // truncated
    cache.clear_memory();
    const int rejected = cache.stats().rejected_entries;
    auto again = cache.get(src, "k.cu", kArch);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->origin, CompiledKernel::Origin::kCompiled) << "damage " << damage;
    EXPECT_EQ((*again)->cubin, (*first)->cubin);
    EXPECT_EQ(cache.stats().rejected_entries, rejected + 1);
  }
}

TEST(KernelCache, ReadOnlyCacheDirStillCompiles) {
  if (::geteuid() == 0) {
    // root ignores permission bits: point the cache at a path under a regular file instead
    CacheDir dir;
    fs::create_directories(dir.path());
    std::ofstream(dir.path() / "kernels") << "not a directory";
    auto& cache = KernelCache::instance();
    const int failures = cache.stats().write_failures;
    auto k = cache.get(small_source() + "// readonly-root\n", "k.cu", kArch);
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_FALSE((*k)->cubin.empty());
    EXPECT_EQ(cache.stats().write_failures, failures + 1);
    return;
  }
  CacheDir dir;
  fs::create_directories(dir.path());
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  auto& cache = KernelCache::instance();
  const int failures = cache.stats().write_failures;
  auto k = cache.get(small_source() + "// readonly\n", "k.cu", kArch);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(cache.stats().write_failures, failures + 1);
}

TEST(KernelCache, ProcessesCompilingTheSameKernelAtOnceAllGetIt) {
  CacheDir dir;
  auto& cache = KernelCache::instance();
  const std::string src = small_source() + "// concurrent\n";
  cache.clear_memory();
  const fs::path go = dir.path() / "go";
  fs::create_directories(dir.path());
  constexpr int kProcesses = 4;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // wait for the start signal so that the compiles overlap, then compile
      while (!fs::exists(go)) ::usleep(1000);
      auto k = KernelCache::instance().get(src, "k.cu", kArch);
      ::_exit(k.ok() && !(*k)->cubin.empty() && std::string((*k)->cubin.data() + 1, 3) == "ELF" ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::ofstream(go) << "go";
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a compiling process failed";
  }
  // one valid entry, no temporary files left, and this process reads it from disk
  auto k = cache.get(src, "k.cu", kArch);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->origin, CompiledKernel::Origin::kDisk);
  for (const auto& e : fs::directory_iterator(dir.path() / "kernels"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "temporary file left behind: " << e.path();
}

TEST(KernelCache, AnEntryUnderAnotherKeyIsNotTrusted) {
  // An entry written for another key (another source, arch or NVRTC version: all are in the key)
  // that ends up at this key's path is rejected by the key stored inside it, and recompiled.
  CacheDir dir;
  auto& cache = KernelCache::instance();
  const std::string a = small_source() + "// key a\n", b = small_source() + "// key b\n";
  auto ka = cache.get(a, "k.cu", kArch);
  ASSERT_TRUE(ka.ok()) << ka.status().message();
  const std::string key_b = KernelCache::key_for(b, kArch);
  fs::copy_file(cache.entry_path((*ka)->key), cache.entry_path(key_b));
  cache.clear_memory();
  const int rejected = cache.stats().rejected_entries;
  auto kb = cache.get(b, "k.cu", kArch);
  ASSERT_TRUE(kb.ok()) << kb.status().message();
  EXPECT_EQ((*kb)->origin, CompiledKernel::Origin::kCompiled);
  EXPECT_EQ(cache.stats().rejected_entries, rejected + 1);
}

TEST(KernelCache, KeyCoversSourceArchCompilerOptionsAndHeaders) {
  const std::string src = small_source();
  const std::string compiler = nvrtc_build();
  ASSERT_FALSE(compiler.empty());
  EXPECT_NE(compiler.find(nvrtc_version() + " libnvrtc"), std::string::npos) << compiler;  // the library's file too
  const std::vector<std::string> options = compile_options("sm_80");
  const std::vector<SourceFile>& headers = embedded_kernel_headers();
  ASSERT_GE(headers.size(), 5u);
  const std::string key = KernelCache::key_for(src, "sm_80", compiler, options, headers);
  // the short form hashes exactly this process's compiler, options and headers
  EXPECT_EQ(KernelCache::key_for(src, "sm_80"), key);
  EXPECT_NE(KernelCache::key_for(src, "sm_90a"), key);
  EXPECT_NE(KernelCache::key_for(src + " ", "sm_80"), key);
  // each input alone changes the key
  EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler + "1", options, headers), key);  // another NVRTC build
  std::vector<std::string> more_options = options;
  more_options.push_back("-G");
  EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler, more_options, headers), key);
  std::vector<std::string> changed_option = options;
  changed_option.back() += "0";
  EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler, changed_option, headers), key);
  for (std::size_t i : {std::size_t(0), headers.size() / 2, headers.size() - 1}) {
    std::vector<SourceFile> edited = headers;
    edited[i].text += "\n";  // one header's text
    EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler, options, edited), key) << headers[i].name;
    edited = headers;
    edited[i].name += "x";  // or its name
    EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler, options, edited), key) << headers[i].name;
  }
  EXPECT_NE(KernelCache::key_for(src, "sm_80", compiler, options, {headers.begin(), headers.end() - 1}), key);
}

}  // namespace
}  // namespace ragdot::cuda
