// canonicalize: the common MoE layouts map onto strides without copies; others are relaid out.
#include <gtest/gtest.h>

#include "core/problem.hpp"

namespace ragdot {
namespace {

core::GroupGemmProblem canon(const RaggedDotSpec& s) {
  auto op = RaggedDot::create(s);
  EXPECT_TRUE(op.ok()) << op.status().to_string();
  return core::canonicalize(*op);
}

TEST(Canonicalize, ForwardIsStridedWithoutCopies) {
  auto p = canon({{DType::kBF16, {64, 32}}, {DType::kBF16, {4, 32, 48}}, {DType::kI32, {4}},
                  RaggedDotDimensionNumbers::ragged_dot(), std::nullopt, std::nullopt});
  EXPECT_EQ(p.mode, RaggedMode::kNonContracting);
  EXPECT_TRUE(p.outer.empty());
  EXPECT_FALSE(p.needs_relayout());
  EXPECT_EQ(p.m, 64);
  EXPECT_EQ(p.k, 32);
  EXPECT_EQ(p.n, 48);
  EXPECT_EQ(p.lhs_m, 32);
  EXPECT_EQ(p.lhs_k, 1);
  EXPECT_EQ(p.rhs_g, 32 * 48);
  EXPECT_EQ(p.rhs_k, 48);
  EXPECT_EQ(p.rhs_n, 1);
  EXPECT_EQ(p.out_m, 48);
  EXPECT_EQ(p.out_n, 1);
  EXPECT_EQ(p.ragged_extent, 64);
  EXPECT_EQ(p.ragged_unit, 1);
}

TEST(Canonicalize, TransposedWeightsAreStrides) {
  RaggedDotSpec s{{DType::kBF16, {64, 32}}, {DType::kBF16, {4, 48, 32}}, {DType::kI32, {4}},
                  RaggedDotDimensionNumbers::ragged_dot(), std::nullopt, std::nullopt};
  s.dims.dot.rhs_contracting = {2};
  auto p = canon(s);
  EXPECT_FALSE(p.needs_relayout());
  EXPECT_EQ(p.rhs_k, 1);
  EXPECT_EQ(p.rhs_n, 32);
}

TEST(Canonicalize, WeightGradient) {
  RaggedDotSpec s;
  s.lhs = {DType::kBF16, {100, 16}};
  s.rhs = {DType::kBF16, {100, 24}};
  s.group_sizes = {DType::kI32, {5}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  auto p = canon(s);
  EXPECT_EQ(p.mode, RaggedMode::kContracting);
  EXPECT_FALSE(p.needs_relayout());
  EXPECT_EQ(p.m, 16);
  EXPECT_EQ(p.k, 100);
  EXPECT_EQ(p.n, 24);
  EXPECT_EQ(p.lhs_m, 1);
  EXPECT_EQ(p.lhs_k, 16);
  EXPECT_EQ(p.rhs_k, 24);
  EXPECT_EQ(p.out_g, 16 * 24);
}

TEST(Canonicalize, InnerNonContractingDimMergesIntoRows) {
  // lhs [r=6, i=2, k=3] ragged on r: rows = r * i, 2 rows per group-size unit
  RaggedDotSpec s{{DType::kF32, {6, 2, 3}}, {DType::kF32, {3, 3, 4}}, {DType::kI32, {3}},
                  RaggedDotDimensionNumbers::ragged_dot(), std::nullopt, std::nullopt};
  s.dims.dot.lhs_contracting = {2};
  auto p = canon(s);
  EXPECT_FALSE(p.needs_relayout());
  EXPECT_EQ(p.m, 12);
  EXPECT_EQ(p.ragged_extent, 6);
  EXPECT_EQ(p.ragged_unit, 2);
  EXPECT_EQ(p.lhs_m, 3);
}

TEST(Canonicalize, BatchAndPrefixDimsBecomeOuterDims) {
  // lhs [b=2, x=3, r=5, k=4], group sizes [b, x, g]
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {2, 3, 5, 4}};
  s.rhs = {DType::kF32, {6, 2, 4, 7}};
  s.group_sizes = {DType::kI32, {2, 3, 6}};
  s.dims.dot = {{3}, {2}, {0}, {1}};
  s.dims.lhs_ragged = {2};
  s.dims.rhs_group = {0};
  auto p = canon(s);
  EXPECT_FALSE(p.needs_relayout());
  ASSERT_EQ(p.outer.size(), 2u);
  EXPECT_EQ(p.outer[0].size, 2);
  EXPECT_EQ(p.outer[0].rhs, 4 * 7);
  EXPECT_EQ(p.outer[0].gs, 18);
  EXPECT_EQ(p.outer[1].size, 3);
  EXPECT_EQ(p.outer[1].rhs, 0) << "x dims do not index the rhs";
  EXPECT_EQ(p.outer[1].gs, 6);
  EXPECT_EQ(p.m, 5);
}

TEST(Canonicalize, InterleavedContractingDimsAreRelaidOut) {
  // lhs [k1, m, k2] with k = (k1, k2): k1 and k2 do not nest in lhs
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {3, 10, 2}};
  s.rhs = {DType::kF32, {4, 3, 2, 5}};
  s.group_sizes = {DType::kI32, {4}};
  s.dims.dot = {{0, 2}, {1, 2}, {}, {}};
  s.dims.lhs_ragged = {1};
  s.dims.rhs_group = {0};
  auto p = canon(s);
  ASSERT_TRUE(p.lhs_relayout.has_value());
  EXPECT_FALSE(p.rhs_relayout.has_value());
  EXPECT_EQ(p.lhs_relayout->sizes, (std::vector<std::int64_t>{10, 3, 2}));
  EXPECT_EQ(p.lhs_relayout->src_strides, (std::vector<std::int64_t>{2, 20, 1}));
  EXPECT_EQ(p.lhs_k, 1);
  EXPECT_EQ(p.lhs_m, 6);
  EXPECT_EQ(p.k, 6);
}

}  // namespace
}  // namespace ragdot
