// Measured planning (PlanningEffort::kMeasure) without a GPU: the candidates it times for the MoE
// shapes (each a variant CI compiles, each reproducible by its override), the tuning cache's
// entries (round trip, tampering, wrong keys, read-only directories), the output cross-check's
// measure, and make_plan's checks of RAGDOT_PLAN_EFFORT and measure_group_sizes. The timing
// itself runs on the GPU (test_cuda_backend: CudaBackend.MeasuredPlans*).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "backends/cuda/kernel_variant.hpp"
#include "backends/cuda/tuning_cache.hpp"
#include "backends/cuda/variant_candidates.hpp"
#include "backends/cuda/variant_timing.hpp"
#include "core/half.hpp"
#include "scoped_env.hpp"
#include "verify/cases.hpp"

namespace ragdot::cuda {
namespace {

namespace fs = std::filesystem;

const DeviceTraits kHopper{9, 0, 227 * 1024}, kAmpere{8, 0, 163 * 1024};

// The canonical problem of mode 1 ([m, k] x [g, k, n]) or mode 2 ([k, m]^T x [k, n] per group,
// ragged along k) with `g` groups, bf16 in and `out` out.
core::GroupGemmProblem problem(int mode, std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g,
                               DType out = DType::kBF16) {
  const std::int64_t extent = mode == 1 ? m : k;
  std::vector<std::int64_t> sizes(std::size_t(g), extent / g);
  auto c = verify::shaped_case(mode, m, k, n, sizes, DType::kBF16, out);
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto op = RaggedDot::create(c->spec);
  EXPECT_TRUE(op.ok()) << op.status().message();
  return core::canonicalize(*op);
}

bool has_spec(const std::vector<Candidate>& cs, const std::string& spec) {
  return std::any_of(cs.begin(), cs.end(), [&](const Candidate& c) { return c.spec == spec; });
}

// Every candidate: the planner's choice first, then alternates CI compiles, each once, each the
// variant its override gives (at the table the candidates assume).
void expect_well_formed(const core::GroupGemmProblem& p, const DeviceTraits& d, const std::vector<Candidate>& cs) {
  const auto chosen = choose_variant(p, d);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  ASSERT_FALSE(cs.empty());
  EXPECT_EQ(cs[0].variant, *chosen);
  EXPECT_EQ(cs[0].spec, "");
  const auto all = all_variants(d);
  std::set<std::string> names;
  for (const Candidate& c : cs) {
    EXPECT_NE(std::find(all.begin(), all.end(), c.variant), all.end()) << c.variant.name() << " is not compiled in CI";
    EXPECT_TRUE(names.insert(c.variant.name()).second) << "twice: " << c.variant.name();
    if (&c == &cs[0]) continue;
    EXPECT_FALSE(c.spec.empty()) << c.variant.name();
    if (c.spec == "small_groups=mma") {
      const auto v = choose_variant(p, d, false);
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(*v, c.variant);
    } else {
      const auto v = override_variant(*chosen, c.spec, d, compiled_table_for(p.num_groups + p.computed_groups));
      ASSERT_TRUE(v.ok()) << c.spec << ": " << v.status().message();
      EXPECT_EQ(*v, c.variant) << c.spec;
    }
  }
}

TEST(MeasuredPlanning, CandidatesForTheMoeShapes) {
  // prefill with few experts (mixtral: ~2048 rows each): the other tile width and the split tail,
  // not swapped operands (their tiles hold 160 rows)
  {
    const auto p = problem(1, 16384, 4096, 14336, 8);
    const auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_TRUE(has_spec(cs, "bn=128"));
    EXPECT_TRUE(has_spec(cs, "split=tail"));
    EXPECT_TRUE(has_spec(cs, "bm=192"));  // the 192 x 192 tile
    EXPECT_FALSE(has_spec(cs, "epilogue=tma"));  // mode 1's lost everywhere on the GPU
    EXPECT_FALSE(has_spec(cs, "swap=ab"));
    EXPECT_FALSE(has_spec(cs, "small_groups=mma"));
  }
  // qwen3's ~256 rows per expert: swapped operands too
  {
    const auto p = problem(1, 32768, 2048, 1536, 128);
    const auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_TRUE(has_spec(cs, "swap=ab")) << p.to_string();
  }
  // deepseek-v3's ~128 rows per expert, which the planner swaps itself: the plain tile is the
  // alternative, and the split tail on it
  for (const auto& p : {problem(1, 32768, 7168, 4096, 256), problem(1, 32768, 2048, 7168, 256)}) {
    const auto chosen = choose_variant(p, kHopper);
    ASSERT_TRUE(chosen.ok());
    EXPECT_TRUE(chosen->swap_ab) << chosen->name();
    const auto cs = candidate_variants(p, kHopper, *chosen);
    expect_well_formed(p, kHopper, cs);
    EXPECT_FALSE(has_spec(cs, "swap=ab")) << p.to_string();
    EXPECT_TRUE(has_spec(cs, "swap=off")) << p.to_string();
    EXPECT_TRUE(has_spec(cs, "split=tail")) << p.to_string();
    EXPECT_FALSE(has_spec(cs, "bm=192")) << p.to_string();  // groups of ~128 rows
  }
  // decode (4 rows per expert): swapped operands and the mma.sync family's 64-row tile
  {
    const auto p = problem(1, 1024, 7168, 4096, 256);
    const auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_TRUE(has_spec(cs, "swap=ab"));
    EXPECT_TRUE(has_spec(cs, "small_groups=mma"));
    EXPECT_FALSE(has_spec(cs, "bm=192"));
  }
  // the weight gradient, 16-bit and f32 outputs: strips (where compiled; with groups of 128 rows
  // the planner's own choice, and then the plain kernel instead, at both tile widths) and, for
  // 16-bit, the TMA-store epilogue
  for (std::int64_t g : {8, 256}) {
    const auto p = problem(2, 7168, 32768, 4096, g);
    const auto chosen = choose_variant(p, kHopper);
    ASSERT_TRUE(chosen.ok());
    EXPECT_EQ(chosen->strips, g == 256) << chosen->name();
    const auto cs = candidate_variants(p, kHopper, *chosen);
    expect_well_formed(p, kHopper, cs);
    EXPECT_TRUE(has_spec(cs, g == 256 ? "strips=off" : "strips=on")) << g;
    EXPECT_TRUE(has_spec(cs, g == 256 ? "bn=128,strips=off" : "bn=128")) << g;
    EXPECT_TRUE(has_spec(cs, "epilogue=tma")) << g;
    EXPECT_FALSE(has_spec(cs, "swap=ab"));
  }
  {
    const auto p = problem(2, 4096, 16384, 14336, 8, DType::kF32);
    const auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_FALSE(has_spec(cs, "epilogue=tma"));
  }
  // f32 outputs of mode 1: no swapped operands (16-bit outputs only)
  {
    const auto p = problem(1, 32768, 7168, 4096, 256, DType::kF32);
    const auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_FALSE(has_spec(cs, "swap=ab"));
  }
  // the MoE layer's fused forms: gathered rows, the SwiGLU epilogue, rows added into a table
  {
    auto p = problem(1, 32768, 2048, 1536, 128);
    p.lhs_gather_rows = 4096;
    auto cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    EXPECT_FALSE(has_spec(cs, "swap=ab"));
    p.lhs_gather_rows.reset();
    p.swiglu_epilogue = true;
    p.out_m = p.n / 2;
    cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
    p.swiglu_epilogue = false;
    p.out_m = p.n;
    p.out_scatter_rows = 4096;
    cs = candidate_variants(p, kHopper, *choose_variant(p, kHopper));
    expect_well_formed(p, kHopper, cs);
  }
  // off Hopper, and for f32 inputs (the FMA family): nothing to measure against
  {
    const auto p = problem(1, 32768, 7168, 4096, 256);
    EXPECT_EQ(candidate_variants(p, kAmpere, *choose_variant(p, kAmpere)).size(), 1u);
  }
}

TEST(MeasuredPlanning, CompiledTablesHoldTheirGroups) {
  EXPECT_EQ(compiled_table_for(16), 64);
  EXPECT_EQ(compiled_table_for(64), 64);
  EXPECT_EQ(compiled_table_for(65), 512);
  EXPECT_EQ(compiled_table_for(512), 512);
  EXPECT_EQ(compiled_table_for(513), -1);
}

TuningRecord sample_record(const std::string& key) {
  TuningRecord r;
  r.key = key;
  r.timings = {{"wgmma bf16*bf16->bf16 mode1 A:K B:N 128x256x64 tma s4", "", 812.5, ""},
               {"wgmma bf16*bf16->bf16 mode1 A:K B:N 160x256x64 tma s4 swapAB", "swap=ab", 640.25, ""},
               {"wgmma bf16*bf16->bf16 mode1 A:K B:N 128x256x64 tma s4 splittail", "split=tail", -1.0,
                "rejected: its output\tdisagrees\nwith the planner's"}};
  r.chosen = 1;
  return r;
}

TEST(MeasuredPlanning, TuningRecordsRoundTripAndRejectTampering) {
  const std::string key = TuningCache::key_for({"problem", "device"});
  EXPECT_EQ(key.size(), 32u);
  EXPECT_NE(key, TuningCache::key_for({"problem", "another device"}));
  EXPECT_NE(TuningCache::key_for({"ab", "c"}), TuningCache::key_for({"a", "bc"}));
  const TuningRecord r = sample_record(key);
  const std::string text = format_tuning_record(r);
  const auto back = parse_tuning_record(text, key);
  ASSERT_TRUE(back.has_value()) << text;
  ASSERT_EQ(back->timings.size(), 3u);
  EXPECT_EQ(back->chosen, 1);
  EXPECT_EQ(back->timings[1].name, r.timings[1].name);
  EXPECT_EQ(back->timings[1].spec, "swap=ab");
  EXPECT_EQ(back->timings[0].spec, "");
  EXPECT_DOUBLE_EQ(back->timings[1].us, 640.25);
  EXPECT_LT(back->timings[2].us, 0.0);
  EXPECT_EQ(back->timings[2].note.find('\n'), std::string::npos);
  // another key, a changed byte, a cut entry, a chosen candidate that was not timed: not trusted
  EXPECT_FALSE(parse_tuning_record(text, TuningCache::key_for({"other"})).has_value());
  std::string flipped = text;
  flipped[flipped.find("640.250")] = '5';
  EXPECT_FALSE(parse_tuning_record(flipped, key).has_value());
  EXPECT_FALSE(parse_tuning_record(text.substr(0, text.size() / 2), key).has_value());
  EXPECT_FALSE(parse_tuning_record("", key).has_value());
  TuningRecord untimed = r;
  untimed.chosen = 2;
  EXPECT_FALSE(parse_tuning_record(format_tuning_record(untimed), key).has_value());
  untimed.chosen = 3;
  EXPECT_FALSE(parse_tuning_record(format_tuning_record(untimed), key).has_value());
  TuningRecord not_a_number = r;
  not_a_number.timings[0].us = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(parse_tuning_record(format_tuning_record(not_a_number), key).has_value());
}

// A scratch RAGDOT_CACHE_DIR for one test, restored afterwards.
class ScratchCacheDir {
 public:
  ScratchCacheDir() {
    char tmpl[] = "/tmp/ragdot-tuning-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    env_.emplace("RAGDOT_CACHE_DIR", dir_);
    TuningCache::instance().clear_memory();
  }
  ~ScratchCacheDir() {
    env_.reset();
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
    TuningCache::instance().clear_memory();
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  std::optional<ragdot::testing::ScopedEnv> env_;
};

TEST(MeasuredPlanning, TuningCacheKeepsEntriesOnDiskAndDistrustsBadOnes) {
  ScratchCacheDir scratch;
  auto& cache = TuningCache::instance();
  const std::string key = TuningCache::key_for({"a problem", "a device"});
  EXPECT_FALSE(cache.find(key).has_value());
  ASSERT_TRUE(cache.store(sample_record(key)));
  const std::string path = cache.entry_path(key);
  EXPECT_EQ(path.rfind(scratch.path() + "/tuning/", 0), 0u) << path;
  ASSERT_TRUE(fs::exists(path));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "a temporary file stayed: " << e.path();
  cache.clear_memory();
  auto found = cache.find(key);  // from disk
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->chosen, 1);
  // a corrupt entry is not trusted (and a new measurement replaces it)
  cache.clear_memory();
  {
    std::ofstream(path, std::ios::trunc) << "ragdot-tuning-v1\nkey " << key << "\nchosen 0\ngarbage\n";
  }
  EXPECT_FALSE(cache.find(key).has_value());
  ASSERT_TRUE(cache.store(sample_record(key)));
  cache.clear_memory();
  EXPECT_TRUE(cache.find(key).has_value());
  // a trial that could not run is remembered in memory only
  TuningRecord unmeasured;
  unmeasured.key = TuningCache::key_for({"no memory for the trial"});
  unmeasured.timings.push_back({"wgmma ...", "", -1.0, "no device memory"});
  cache.remember(unmeasured);
  ASSERT_TRUE(cache.find(unmeasured.key).has_value());
  EXPECT_FALSE(fs::exists(cache.entry_path(unmeasured.key)));
  // an entry filed under another key is not trusted either
  const std::string other = TuningCache::key_for({"another problem"});
  fs::copy_file(path, cache.entry_path(other));
  cache.clear_memory();
  EXPECT_FALSE(cache.find(other).has_value());
}

TEST(MeasuredPlanning, ReadOnlyCacheDirKeepsEntriesInMemory) {
  ScratchCacheDir scratch;
  if (::geteuid() == 0) {
    std::ofstream(scratch.path() + "/tuning") << "not a directory";  // root ignores permission bits
  } else {
    fs::permissions(scratch.path(), fs::perms::owner_read | fs::perms::owner_exec);
  }
  auto& cache = TuningCache::instance();
  const std::string key = TuningCache::key_for({"read-only"});
  EXPECT_FALSE(cache.store(sample_record(key)));
  const auto found = cache.find(key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->chosen, 1);
}

std::vector<unsigned char> bf16_bytes(const std::vector<float>& v) {
  std::vector<unsigned char> b(v.size() * 2);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint16_t h = core::f32_to_bf16(v[i]);
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

TEST(MeasuredPlanning, OutputDisagreementMeasuresRelativeDifferences) {
  const std::vector<float> ref = {1.0f, -2.0f, 0.0f, 4.0f, 0.5f, -0.25f};
  EXPECT_EQ(output_disagreement(bf16_bytes(ref), bf16_bytes(ref), DType::kBF16), 0.0);
  std::vector<float> near = ref;
  near[3] = 4.03125f;  // one bf16 step at 4
  const double one_step = output_disagreement(bf16_bytes(near), bf16_bytes(ref), DType::kBF16);
  EXPECT_GT(one_step, 0.0);
  EXPECT_LT(one_step, 1.0 / 32);
  std::vector<float> far = ref;
  far[2] = 1.0f;  // where the reference is 0: against its rms (~2)
  EXPECT_GT(output_disagreement(bf16_bytes(far), bf16_bytes(ref), DType::kBF16), 1.0 / 32);
  std::vector<float> unwritten = ref;
  unwritten[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(output_disagreement(bf16_bytes(unwritten), bf16_bytes(ref), DType::kBF16)));
  EXPECT_TRUE(std::isinf(output_disagreement(bf16_bytes(ref), bf16_bytes(unwritten), DType::kBF16)));
  std::vector<float> shorter(ref.begin(), ref.end() - 1);
  EXPECT_TRUE(std::isinf(output_disagreement(bf16_bytes(shorter), bf16_bytes(ref), DType::kBF16)));
  // f32 storage
  std::vector<unsigned char> a(ref.size() * 4), b(ref.size() * 4);
  std::memcpy(a.data(), ref.data(), a.size());
  std::memcpy(b.data(), ref.data(), b.size());
  EXPECT_EQ(output_disagreement(a, b, DType::kF32), 0.0);
  const float bumped = 4.0f * (1.0f + 1e-6f);
  std::memcpy(&a[12], &bumped, 4);
  EXPECT_LT(output_disagreement(a, b, DType::kF32), 1e-5);
}

}  // namespace

// make_plan's side: the environment's effort and the sizes to measure with are checked for every
// backend, whether or not it measures.
namespace {

RaggedDot moe_op(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g) {
  RaggedDotSpec spec;
  spec.lhs = {DType::kF32, {m, k}};
  spec.rhs = {DType::kF32, {g, k, n}};
  spec.group_sizes = {DType::kI32, {g}};
  auto op = RaggedDot::create(spec);
  EXPECT_TRUE(op.ok()) << op.status().message();
  return *op;
}

using ragdot::testing::ScopedEnv;

TEST(MeasuredPlanning, MakePlanChecksEffortAndMeasureSizes) {
  const RaggedDot op = moe_op(12, 8, 16, 3);
  PlanOptions o;
  o.backend = "cpu";
  o.effort = PlanningEffort::kMeasure;  // the cpu backend plans as for kHeuristic
  EXPECT_TRUE(make_plan(op, o).ok());
  o.measure_group_sizes = {4, 0, 7};
  EXPECT_TRUE(make_plan(op, o).ok());
  o.measure_group_sizes = {4, 0};
  auto bad = make_plan(op, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("3 groups"), std::string::npos) << bad.status().message();
  o.measure_group_sizes = {4, -1, 7};
  bad = make_plan(op, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("negative"), std::string::npos) << bad.status().message();
  o.measure_group_sizes = {4, 5, 4};
  bad = make_plan(op, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exceeds"), std::string::npos) << bad.status().message();
  o.measure_group_sizes = {1, std::numeric_limits<std::int64_t>::max(), 0};  // a sum that would wrap negative
  bad = make_plan(op, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exceeds"), std::string::npos) << bad.status().message();
  o.measure_group_sizes.clear();
  {
    ScopedEnv env("RAGDOT_PLAN_EFFORT", "measure");
    EXPECT_TRUE(make_plan(op, o).ok());
  }
  {
    ScopedEnv env("RAGDOT_PLAN_EFFORT", "exhaustive");
    bad = make_plan(op, o);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("RAGDOT_PLAN_EFFORT"), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace ragdot::cuda
