// The oracle and every CPU backend against results computed by JAX itself (tests/data).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "backends/cpu/reference.hpp"
#include "isa_env.hpp"
#include "scoped_env.hpp"
#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

struct Golden {
  std::string name;
  RaggedDotSpec spec;
  std::vector<double> lhs, rhs, out;
  std::vector<std::int64_t> gs, out_shape;
};

std::vector<std::int64_t> ints(std::istringstream& is) {
  std::vector<std::int64_t> v;
  std::int64_t x;
  while (is >> x) v.push_back(x);
  return v;
}

std::vector<Golden> load() {
  std::ifstream f(std::string(RAGDOT_TEST_DATA) + "/jax_golden.txt");
  std::vector<Golden> cases;
  std::string line;
  Golden g;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string tag;
    is >> tag;
    auto& s = g.spec;
    if (tag == "case") {
      g = Golden{};
      is >> g.name;
      g.spec.dims.dot = {};
      g.spec.dims.rhs_group.clear();
    } else if (tag == "lhs_shape") s.lhs.shape = ints(is);
    else if (tag == "rhs_shape") s.rhs.shape = ints(is);
    else if (tag == "gs_shape") s.group_sizes.shape = ints(is);
    else if (tag == "lc") s.dims.dot.lhs_contracting = ints(is);
    else if (tag == "rc") s.dims.dot.rhs_contracting = ints(is);
    else if (tag == "lb") s.dims.dot.lhs_batch = ints(is);
    else if (tag == "rb") s.dims.dot.rhs_batch = ints(is);
    else if (tag == "group") s.dims.rhs_group = ints(is);
    else if (tag == "ragged") s.dims.lhs_ragged = ints(is);
    else if (tag == "lhs") for (auto x : ints(is)) g.lhs.push_back(double(x));
    else if (tag == "rhs") for (auto x : ints(is)) g.rhs.push_back(double(x));
    else if (tag == "gs") g.gs = ints(is);
    else if (tag == "out_shape") g.out_shape = ints(is);
    else if (tag == "out") for (auto x : ints(is)) g.out.push_back(double(x));
    else if (tag == "end") {
      g.spec.group_sizes.dtype = DType::kI32;
      cases.push_back(g);
    }
  }
  return cases;
}

std::vector<unsigned char> encode(const std::vector<double>& v, DType dt) {
  std::vector<unsigned char> b(v.size() * dtype_size(dt) + 1);
  for (std::size_t i = 0; i < v.size(); ++i) cpu::store_from_double(b.data(), dt, std::int64_t(i), v[i]);
  return b;
}

// Runs the golden case on a backend with all operands in `dt` and checks the result bit-exactly
// (the inputs are small integers, so every dtype represents every result exactly).
// Returns false when the backend does not take the case (it must then say so as kUnsupported).
bool run_golden(const Golden& g, DType dt, const std::string& backend) {
  RaggedDotSpec s = g.spec;
  s.lhs.dtype = s.rhs.dtype = dt;
  s.group_sizes.dtype = DType::kI32;
  auto op = RaggedDot::create(s);
  EXPECT_TRUE(op.ok()) << g.name << ": " << op.status().to_string();
  if (!op.ok()) return false;
  EXPECT_EQ(op->out().shape, g.out_shape) << g.name;
  PlanOptions po;
  po.backend = backend;
  auto plan = make_plan(*op, po);
  if (!plan.ok() && plan.status().code() == StatusCode::kUnsupported) return false;
  EXPECT_TRUE(plan.ok()) << g.name << ": " << plan.status().to_string();
  if (!plan.ok()) return false;
  auto lhs = encode(g.lhs, dt), rhs = encode(g.rhs, dt);
  std::vector<std::int32_t> gs(g.gs.begin(), g.gs.end());
  std::vector<unsigned char> out(op->out().num_bytes() + 1);
  verify::poison(out.data(), op->out().dtype, op->out().num_elements());
  std::vector<unsigned char> ws(plan->workspace_bytes() + 64);
  auto* wsp = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(ws.data()) + 63) / 64 * 64);
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size()};
  a.rhs = {rhs.data(), rhs.size()};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {out.data(), out.size()};
  a.workspace = {wsp, plan->workspace_bytes()};
  Status st = plan->execute(a);
  EXPECT_TRUE(st.is_ok()) << g.name << ": " << st.to_string();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < g.out.size(); ++i) {
    const double o = cpu::load_as_double(out.data(), op->out().dtype, std::int64_t(i));
    if (o != g.out[i] && wrong++ == 0) {
      ADD_FAILURE() << g.name << " on " << backend << " (" << plan->variant() << ") element " << i << ": " << o
                    << " != " << g.out[i];
    }
  }
  EXPECT_EQ(wrong, 0u) << g.name;
  return true;
}

TEST(Golden, FileHasEveryMode) {
  auto cases = load();
  ASSERT_GE(cases.size(), 10u);
  int modes[4] = {0, 0, 0, 0};
  for (const auto& g : cases) {
    auto op = RaggedDot::create(g.spec);
    ASSERT_TRUE(op.ok()) << g.name << ": " << op.status().to_string();
    ++modes[int(op->mode())];
  }
  EXPECT_GT(modes[1], 0);
  EXPECT_GT(modes[2], 0);
  EXPECT_GT(modes[3], 0);
}

TEST(Golden, ReferenceMatchesJax) {
  for (const auto& g : load()) EXPECT_TRUE(run_golden(g, DType::kF32, "cpu_ref")) << g.name;
}

// The oracle's whole output on several threads (evaluate, which every check of a backend uses)
// against its elements one at a time (at): bitwise the same, in every mode, with empty groups, a
// tail no group covers, 16-bit and f32 operands, and random general cases (batch dims, several
// m/k/n dims, permuted axes, group offsets). Three threads, whatever the machine has.
TEST(Golden, ReferenceOnThreadsMatchesElementByElement) {
  const testing::ScopedEnv three("RAGDOT_NUM_THREADS", "3");
  std::vector<verify::Case> cases;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (auto shaped : {verify::shaped_case(1, 300, 40, 64, {100, 0, 150, 37}, dt),
                        verify::shaped_case(2, 70, 300, 64, {0, 299, 1}, dt),
                        verify::shaped_case(3, 64, 40, 72, {1, 1, 1}, dt)}) {
      ASSERT_TRUE(shaped.ok()) << shaped.status().message();
      cases.push_back(*shaped);
    }
  }
  verify::CaseOptions opts;
  opts.max_dim = 60;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) cases.push_back(verify::random_case(seed, opts));
  int threaded = 0;
  std::uint64_t seed = 500;
  for (const verify::Case& c : cases) {
    auto op = RaggedDot::create(c.spec);
    ASSERT_TRUE(op.ok()) << c.description << ": " << op.status().to_string();
    std::vector<unsigned char> lhs(c.spec.lhs.num_bytes() + 1), rhs(c.spec.rhs.num_bytes() + 1);
    verify::fill_random(lhs.data(), c.spec.lhs.dtype, c.spec.lhs.num_elements(), ++seed);
    verify::fill_random(rhs.data(), c.spec.rhs.dtype, c.spec.rhs.num_elements(), ++seed);
    const std::vector<unsigned char> gs = verify::encode_group_sizes(c);
    const std::int32_t offset = c.group_offset.value_or(0);
    auto ref = cpu::ReferenceEvaluator::create(*op, lhs.data(), rhs.data(), gs.data(), c.group_offset ? &offset : nullptr);
    ASSERT_TRUE(ref.ok()) << c.description << ": " << ref.status().to_string();
    const std::vector<double> all = ref->evaluate();
    ASSERT_EQ(std::int64_t(all.size()), op->out().num_elements()) << c.description;
    threaded += all.size() >= 4096;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const double one = ref->at(std::int64_t(i));
      if (std::memcmp(&one, &all[i], sizeof one) != 0 && differ++ == 0)
        ADD_FAILURE() << c.description << " element " << i << ": " << all[i] << " on threads, " << one << " alone";
    }
    EXPECT_EQ(differ, 0u) << c.description;
  }
  EXPECT_GE(threaded, 6) << "too few cases large enough to run on threads";
}

TEST(Golden, CpuMatchesJaxOnEveryKernel) {
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      int ran = 0;
      for (const auto& g : load()) {
        SCOPED_TRACE(isa + " " + std::string(dtype_name(dt)) + " " + g.name);
        ran += run_golden(g, dt, "cpu");
      }
      EXPECT_GE(ran, 10) << "only the contracting-prefix case may fall back to cpu_ref";
    }
  }
}

TEST(Golden, PaddedMatchesJaxWhereItApplies) {
  int ran = 0;
  for (const auto& g : load()) {
    RaggedDotSpec s = g.spec;
    auto op = RaggedDot::create(s);
    ASSERT_TRUE(op.ok());
    PlanOptions po;
    po.backend = "padded";
    if (!make_plan(*op, po).ok()) continue;
    EXPECT_TRUE(run_golden(g, DType::kF32, "padded"));
    EXPECT_TRUE(run_golden(g, DType::kBF16, "padded"));
    ++ran;
  }
  EXPECT_GE(ran, 3);
}

}  // namespace
}  // namespace ragdot
