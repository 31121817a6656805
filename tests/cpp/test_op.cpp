// describe: JAX's shape and dtype rules, and errors that name the offending dimension.
#include <gtest/gtest.h>

#include "ragdot/op.hpp"

namespace ragdot {
namespace {

RaggedDotSpec basic(std::int64_t m = 8, std::int64_t k = 4, std::int64_t n = 5, std::int64_t g = 3) {
  return {{DType::kBF16, {m, k}}, {DType::kBF16, {g, k, n}}, {DType::kI32, {g}}, RaggedDotDimensionNumbers::ragged_dot(),
          std::nullopt, std::nullopt};
}

void expect_error(const RaggedDotSpec& s, StatusCode code, const std::string& fragment) {
  auto op = RaggedDot::create(s);
  ASSERT_FALSE(op.ok()) << "accepted " << s.lhs.to_string() << " x " << s.rhs.to_string();
  EXPECT_EQ(op.status().code(), code) << op.status().to_string();
  EXPECT_NE(op.status().message().find(fragment), std::string::npos)
      << "message '" << op.status().message() << "' lacks '" << fragment << "'";
}

TEST(Op, RaggedDotShapeAndMode) {
  auto op = RaggedDot::create(basic());
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  EXPECT_EQ(op->mode(), RaggedMode::kNonContracting);
  EXPECT_EQ(op->out().shape, (std::vector<std::int64_t>{8, 5}));
  EXPECT_EQ(op->out().dtype, DType::kBF16);
  EXPECT_EQ(op->num_groups(), 3);
  EXPECT_DOUBLE_EQ(op->max_flops(), 2.0 * 8 * 4 * 5);
}

TEST(Op, ContractingModePrependsGroups) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {10, 3}};
  s.rhs = {DType::kF32, {10, 4}};
  s.group_sizes = {DType::kI64, {6}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  auto op = RaggedDot::create(s);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  EXPECT_EQ(op->mode(), RaggedMode::kContracting);
  EXPECT_EQ(op->out().shape, (std::vector<std::int64_t>{6, 3, 4}));
  EXPECT_DOUBLE_EQ(op->max_flops(), 2.0 * 3 * 4 * 10);
}

TEST(Op, BatchModeIsDotGeneralShape) {
  RaggedDotSpec s;
  s.lhs = {DType::kF16, {4, 2, 3}};
  s.rhs = {DType::kF16, {4, 3, 7}};
  s.group_sizes = {DType::kI32, {2}};
  s.dims.dot = {{2}, {1}, {0}, {0}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  auto op = RaggedDot::create(s);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  EXPECT_EQ(op->mode(), RaggedMode::kBatch);
  EXPECT_EQ(op->out().shape, (std::vector<std::int64_t>{4, 2, 7}));
}

TEST(Op, OutputDtypeFollowsJax) {
  EXPECT_EQ(*infer_output_dtype(DType::kBF16, DType::kF32, std::nullopt), DType::kF32);
  EXPECT_EQ(*infer_output_dtype(DType::kF16, DType::kBF16, std::nullopt), DType::kBF16);
  EXPECT_EQ(*infer_output_dtype(DType::kF16, DType::kF16, std::nullopt), DType::kF16);
  EXPECT_EQ(*infer_output_dtype(DType::kBF16, DType::kBF16, DType::kF32), DType::kF32);
  EXPECT_EQ(*infer_output_dtype(DType::kF32, DType::kF32, DType::kBF16), DType::kBF16);
  EXPECT_FALSE(infer_output_dtype(DType::kF64, DType::kF32, std::nullopt).ok());
  EXPECT_FALSE(infer_output_dtype(DType::kF32, DType::kF32, DType::kI32).ok());
}

TEST(Op, GroupSizesWithPrefixDims) {
  // lhs [b, m, k] with batch 0: group sizes [b, g] (or [g])
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {2, 6, 3}};
  s.rhs = {DType::kF32, {4, 2, 3, 5}};
  s.group_sizes = {DType::kI32, {2, 4}};
  s.dims.dot = {{2}, {2}, {0}, {1}};
  s.dims.lhs_ragged = {1};
  s.dims.rhs_group = {0};
  ASSERT_TRUE(RaggedDot::create(s).ok()) << RaggedDot::create(s).status().to_string();
  s.group_sizes.shape = {4};
  EXPECT_TRUE(RaggedDot::create(s).ok());
  s.group_sizes.shape = {3, 4};
  expect_error(s, StatusCode::kInvalidArgument, "group_sizes must have shape [2,4]");
}

TEST(Op, RejectsBadDimensionNumbers) {
  auto s = basic();
  s.rhs.shape = {3, 6, 5};
  expect_error(s, StatusCode::kInvalidArgument, "contracting dimension pair 0 (lhs dim 1, rhs dim 1) has sizes 4 and 6");
  s = basic();
  s.dims.dot.lhs_contracting = {2};
  expect_error(s, StatusCode::kInvalidArgument, "lhs contracting dimension 2 is out of range for lhs of rank 2");
  s = basic();
  s.dims.lhs_ragged = {0, 1};
  expect_error(s, StatusCode::kInvalidArgument, "exactly one lhs ragged dimension");
  s = basic();
  s.dims.lhs_ragged = {};
  expect_error(s, StatusCode::kInvalidArgument, "exactly one lhs ragged dimension");
  s = basic();
  s.dims.rhs_group = {};
  expect_error(s, StatusCode::kInvalidArgument, "needs exactly one rhs group dimension");
  s = basic();
  s.dims.rhs_group = {1};
  expect_error(s, StatusCode::kInvalidArgument, "must be distinct from the rhs batch and contracting");
  s = basic();
  s.rhs.shape = {4, 4, 5};
  expect_error(s, StatusCode::kInvalidArgument, "rhs group dimension 0 must have size 3");
  s = basic();
  s.dims.dot.lhs_batch = {0};
  expect_error(s, StatusCode::kInvalidArgument, "same number of batch dimensions");
  s = basic();
  s.dims.dot.lhs_contracting = {1, 1};
  s.dims.dot.rhs_contracting = {1, 2};
  expect_error(s, StatusCode::kInvalidArgument, "lhs contracting dimensions must be distinct");
}

TEST(Op, RejectsBadTensors) {
  auto s = basic();
  s.lhs.shape = {-1, 4};
  expect_error(s, StatusCode::kInvalidArgument, "lhs dimension 0 has negative size -1");
  s = basic();
  s.lhs.dtype = DType::kF64;
  expect_error(s, StatusCode::kUnsupported, "lhs dtype f64");
  s = basic();
  s.group_sizes.dtype = DType::kF32;
  expect_error(s, StatusCode::kUnsupported, "group_sizes dtype f32 is not int32 or int64");
  s = basic();
  s.group_sizes.shape = {};
  expect_error(s, StatusCode::kInvalidArgument, "group_sizes must have rank >= 1");
  s = basic();
  s.lhs.shape = {std::int64_t(1) << 40, std::int64_t(1) << 30};
  expect_error(s, StatusCode::kInvalidArgument, "too many elements");
  // Empty, but its row-major strides would overflow: still rejected.
  s = basic();
  s.lhs.shape = {0, std::int64_t(1) << 40, std::int64_t(1) << 30};
  expect_error(s, StatusCode::kInvalidArgument, "too many elements");
}

TEST(Op, RhsGroupDimInOtherModes) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {10, 3}};
  s.rhs = {DType::kF32, {10, 4}};
  s.group_sizes = {DType::kI32, {2}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {1};
  expect_error(s, StatusCode::kInvalidArgument, "rhs group dimensions must be empty when the lhs ragged dimension is contracting");
}

TEST(Op, GroupOffset) {
  auto s = basic(8, 4, 5, 6);
  s.rhs.shape = {2, 4, 5};
  s.group_offset = GroupOffset{2};
  auto op = RaggedDot::create(s);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  EXPECT_EQ(op->num_groups(), 6);
  EXPECT_EQ(op->computed_groups(), 2);
  s.group_offset = GroupOffset{7};
  expect_error(s, StatusCode::kInvalidArgument, "local_groups must be in [0, 6]");
  s.group_offset = GroupOffset{3};
  expect_error(s, StatusCode::kInvalidArgument, "rhs group dimension 0 must have size 3 (local_groups)");

  RaggedDotSpec m2;
  m2.lhs = {DType::kF32, {10, 3}};
  m2.rhs = {DType::kF32, {10, 4}};
  m2.group_sizes = {DType::kI32, {6}};
  m2.dims.dot = {{0}, {0}, {}, {}};
  m2.dims.lhs_ragged = {0};
  m2.dims.rhs_group = {};
  m2.group_offset = GroupOffset{4};
  auto op2 = RaggedDot::create(m2);
  ASSERT_TRUE(op2.ok()) << op2.status().to_string();
  EXPECT_EQ(op2->out().shape, (std::vector<std::int64_t>{4, 3, 4}));

  RaggedDotSpec m3;
  m3.lhs = {DType::kF32, {4, 2, 3}};
  m3.rhs = {DType::kF32, {4, 3, 7}};
  m3.group_sizes = {DType::kI32, {2}};
  m3.dims.dot = {{2}, {1}, {0}, {0}};
  m3.dims.lhs_ragged = {0};
  m3.dims.rhs_group = {};
  m3.group_offset = GroupOffset{1};
  expect_error(m3, StatusCode::kInvalidArgument, "group_offset applies to ragged non-contracting and ragged contracting");
}

TEST(Op, ZeroSizedDimsAreValid) {
  EXPECT_TRUE(RaggedDot::create(basic(0, 4, 5, 3)).ok());
  EXPECT_TRUE(RaggedDot::create(basic(8, 0, 5, 3)).ok());
  EXPECT_TRUE(RaggedDot::create(basic(8, 4, 0, 3)).ok());
  EXPECT_TRUE(RaggedDot::create(basic(8, 4, 5, 0)).ok());
}

}  // namespace
}  // namespace ragdot
