// The CLI's building blocks, called directly: option and value parsing, JSON and PNG output, the
// sample check (it must catch a wrong output), default sizes, op descriptions, the case matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend_measure.hpp"
#include "bar_chart.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "moe_case.hpp"
#include "op_request.hpp"
#include "operand_set.hpp"
#include "option_parser.hpp"
#include "png_encoder.hpp"
#include "png_reader.hpp"
#include "sample_check.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "value_parsers.hpp"
#include "verify_matrix.hpp"

namespace ragdot::cli {
namespace {

using testing::JsonValue;

TEST(CliOptions, ParsesValuesSwitchesAndBothSpellings) {
  const std::vector<OptionSpec> specs = {{"tokens", "N", ""}, {"model", "PRESET", ""}, {"quiet", "", ""}};
  const auto p = parse_options("run", specs, {"--tokens", "64", "--model=qwen3", "--quiet", "--tokens", "128"});
  EXPECT_EQ(p.get("tokens"), "128") << "the last repetition wins";
  EXPECT_EQ(p.get("model"), "qwen3");
  EXPECT_TRUE(p.has("quiet"));
  EXPECT_FALSE(p.help_requested());
  EXPECT_TRUE(parse_options("run", specs, {"-h"}).help_requested());
}

TEST(CliOptions, RejectsWhatCanNeverWork) {
  const std::vector<OptionSpec> specs = {{"tokens", "N", ""}, {"quiet", "", ""}};
  EXPECT_THROW(parse_options("run", specs, {"--bogus"}), UsageError);
  EXPECT_THROW(parse_options("run", specs, {"--tokens"}), UsageError);
  EXPECT_THROW(parse_options("run", specs, {"--quiet=1"}), UsageError);
  EXPECT_THROW(parse_options("run", specs, {"positional"}), UsageError);
  EXPECT_THROW(parse_options("run", specs, {"-x"}), UsageError);
  try {
    parse_options("run", specs, {"--bogus"});
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'ragdot run --help'"), std::string::npos) << e.what();
  }
}

TEST(CliValues, NumbersListsAndDtypes) {
  EXPECT_EQ(parse_integer("42", "n", 0, 100), 42);
  EXPECT_EQ(parse_integer("+7", "n", 0, 100), 7);
  EXPECT_THROW(parse_integer("101", "n", 0, 100), UsageError);
  EXPECT_THROW(parse_integer("4x", "n", 0, 100), UsageError);
  EXPECT_THROW(parse_integer("", "n", 0, 100), UsageError);
  EXPECT_THROW(parse_integer("99999999999999999999", "n", 0, 100), UsageError);
  EXPECT_DOUBLE_EQ(parse_real("1.2", "skew", 0, 10), 1.2);
  EXPECT_THROW(parse_real("inf", "skew", 0, 10), UsageError);
  EXPECT_THROW(parse_real("nan", "skew", 0, 10), UsageError);
  EXPECT_THROW(parse_real("-0.5", "skew", 0, 10), UsageError);
  EXPECT_EQ(split_list("cpu, padded", "b"), (std::vector<std::string>{"cpu", "padded"}));
  EXPECT_THROW(split_list("cpu,", "b"), UsageError);
  EXPECT_EQ(parse_real_list("0,1.2", "s", 0, 10), (std::vector<double>{0.0, 1.2}));
  EXPECT_EQ(parse_operand_dtype("bfloat16", "dtype"), DType::kBF16);
  EXPECT_EQ(parse_operand_dtype("f32", "dtype"), DType::kF32);
  EXPECT_THROW(parse_operand_dtype("i32", "dtype"), UsageError);
  EXPECT_EQ(parse_mode("2", "mode"), 2);
  EXPECT_THROW(parse_mode("0", "mode"), UsageError);
  const GemmShape s = parse_shape("8,16,32", "shape");
  EXPECT_EQ(s.m, 8);
  EXPECT_EQ(s.n, 32);
  EXPECT_THROW(parse_shape("8,16", "shape"), UsageError);
}

TEST(CliJson, WritesWhatAStrictReaderReadsBack) {
  JsonWriter j;
  j.begin_object();
  j.key("text");
  j.value("quote \" backslash \\ newline \n tab \t bell \x07");
  j.key("int64");
  j.value(std::int64_t(1) << 40);
  j.key("real");
  j.value(0.125);
  j.key("not finite");
  j.value(std::nan(""));
  j.key("list");
  j.begin_array();
  j.value(true);
  j.null();
  j.begin_object();
  j.end_object();
  j.begin_array();
  j.end_array();
  j.end_array();
  j.end_object();
  std::string error;
  const auto v = testing::parse_json(j.text(), &error);
  ASSERT_TRUE(v) << error << "\n" << j.text();
  EXPECT_EQ(v->get("text")->string, "quote \" backslash \\ newline \n tab \t bell \x07");
  EXPECT_EQ(v->get("int64")->number, double(std::int64_t(1) << 40));
  EXPECT_EQ(v->get("real")->number, 0.125);
  EXPECT_EQ(v->get("not finite")->kind, JsonValue::Kind::kNull) << "JSON has no NaN";
  ASSERT_EQ(v->get("list")->array.size(), 4u);
  EXPECT_TRUE(v->get("list")->array[0].boolean);
}

TEST(CliJson, TheTestReaderIsStrict) {
  for (const char* bad : {"{\"a\": 1,}", "[1 2]", "{\"a\": NaN}", "{'a': 1}", "[01]", "\"tab\there\"", "{} x"}) {
    EXPECT_FALSE(testing::parse_json(bad)) << bad;
  }
}

TEST(CliPng, ChecksumsMatchTheirStandards) {
  const std::uint8_t iend[] = {'I', 'E', 'N', 'D'};
  EXPECT_EQ(crc32(iend, 4), 0xAE426082u);  // the CRC every PNG ends with
  const char* wiki = "Wikipedia";
  EXPECT_EQ(adler32(reinterpret_cast<const std::uint8_t*>(wiki), std::strlen(wiki)), 0x11E60398u);
}

TEST(CliPng, EncodesPixelsAReaderGetsBack) {
  // wide enough to need several stored deflate blocks (65535 bytes each)
  const int w = 300, h = 100;
  std::vector<std::uint8_t> rgb(std::size_t(w * h * 3));
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = std::uint8_t(i * 7 + i / 3);
  std::string error;
  const auto img = testing::read_png(encode_png_rgb(w, h, rgb), &error);
  ASSERT_TRUE(img) << error;
  EXPECT_EQ(img->width, w);
  EXPECT_EQ(img->height, h);
  EXPECT_EQ(img->rgb, rgb);
}

TEST(CliChart, DrawsOneColouredBarPerValue) {
  BarChart chart;
  chart.title = "title";
  chart.value_axis = "TFLOP/s";
  chart.series = {"cpu", "padded"};
  chart.groups = {{{"qwen3", "up"}, {2.0, 1.0}}, {{"qwen3", "down"}, {1.5, NAN}}};
  const RasterCanvas c = render_bar_chart(chart);
  EXPECT_GE(c.width(), 640);
  std::size_t blue = 0, orange = 0;
  for (std::size_t i = 0; i + 2 < c.pixels().size(); i += 3) {
    const auto* p = &c.pixels()[i];
    if (p[0] == 31 && p[1] == 119 && p[2] == 180) ++blue;
    if (p[0] == 255 && p[1] == 127 && p[2] == 14) ++orange;
  }
  EXPECT_GT(blue, orange) << "two blue bars, one orange bar (NaN draws none)";
  EXPECT_GT(orange, 0u);
}

TEST(CliTable, AlignsColumns) {
  TextTable t;
  t.add_column("name");
  t.add_column("value", TextTable::Align::kRight);
  t.add_row({"a", "1"});
  t.add_row({"longer", "12345"});
  EXPECT_EQ(t.render(), "name    value\na           1\nlonger  12345\n");
  EXPECT_EQ(format("%d-%s", 3, "x"), "3-x");
}

MoeGemmCase small_case() {
  auto preset = workloads::find_preset("qwen3-30b-a3b");
  return layer_cases(*preset, 32, 1.2, 5, DType::kBF16, 8).front();
}

TEST(CliSampleCheck, PassesARightOutputAndCatchesAWrongOne) {
  const MoeGemmCase gemm = small_case();
  auto operands = OperandSet::create(gemm.m * gemm.k, gemm.groups * gemm.k * gemm.n, gemm.dtype, gemm.group_sizes, 3);
  ASSERT_TRUE(operands.ok()) << operands.status().to_string();
  MeasureRequest request = default_measure_request("cpu", 1);
  request.keep_output = true;
  auto m = measure_backend(gemm, **operands, request);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const SampleCheck good = check_sample(gemm, **operands, m->output, m->out_dtype);
  EXPECT_TRUE(good.passed) << good.summary();
  EXPECT_GT(good.rows, 0);

  // Row 0 (the first row of the first non-empty group) and column 0 are always sampled.
  auto wrong = m->output;
  wrong[0] = 0xc8;  // bf16 100.0, far from any entry of a product of values in [-1, 1) over k = 256
  wrong[1] = 0x42;
  const SampleCheck bad = check_sample(gemm, **operands, wrong, m->out_dtype);
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.summary().find("FAILED"), std::string::npos) << bad.summary();

  auto unwritten = m->output;
  verify::poison(unwritten.data(), m->out_dtype, gemm.m * gemm.n);
  const SampleCheck nan = check_sample(gemm, **operands, unwritten, m->out_dtype);
  EXPECT_FALSE(nan.passed);
  EXPECT_NE(nan.message.find("NaN"), std::string::npos) << nan.message;
}

TEST(CliSizes, FollowTheDeviceMemoryAndSpeed) {
  const auto mixtral = *workloads::find_preset("mixtral-8x7b");
  const double lots = 512e9;
  const SizeDefaults gpu = default_sizes(mixtral, DType::kBF16, MemorySpace::kDevice, lots, 0, 0);
  EXPECT_EQ(gpu.tokens, 4096);
  EXPECT_EQ(gpu.shrink, 1);

  const SizeDefaults fast = default_sizes(mixtral, DType::kBF16, MemorySpace::kHost, lots, 0, 2e12);
  EXPECT_EQ(fast.shrink, 1);
  const double up_flops_per_token = 2.0 * 2 * 4096 * 2 * 14336;
  EXPECT_LE(double(fast.tokens) * up_flops_per_token, 2e12 * kHostSecondsPerGemm);
  EXPECT_GT(double(fast.tokens) * 2 * up_flops_per_token, 2e12 * kHostSecondsPerGemm);

  const SizeDefaults slow = default_sizes(mixtral, DType::kBF16, MemorySpace::kHost, lots, 0, 3e9);
  EXPECT_GT(slow.shrink, 1) << "scalar kernels get smaller layers";
  EXPECT_GE(slow.tokens, 16);

  const SizeDefaults small_memory = default_sizes(mixtral, DType::kBF16, MemorySpace::kHost, 2e9, 0, 2e12);
  EXPECT_LE(largest_weight_bytes(shrunk_preset(mixtral, small_memory.shrink), DType::kBF16), 0.25 * 2e9);

  const SizeDefaults forced = default_sizes(mixtral, DType::kBF16, MemorySpace::kHost, 2e9, 3, 3e9);
  EXPECT_EQ(forced.shrink, 3) << "--shrink wins";
}

TEST(CliOpRequest, BuildsThePlainFormOfEachMode) {
  OpRequest r;
  r.m = 10;
  r.k = 6;
  r.n = 4;
  r.groups = 3;
  r.batch = 5;
  r.dtype = DType::kF32;
  r.mode = 1;
  auto forward = make_op(r);
  ASSERT_TRUE(forward.ok()) << forward.status().to_string();
  EXPECT_EQ(forward->out().shape, (std::vector<std::int64_t>{10, 4}));
  r.mode = 2;
  auto grad = make_op(r);
  ASSERT_TRUE(grad.ok()) << grad.status().to_string();
  EXPECT_EQ(grad->out().shape, (std::vector<std::int64_t>{3, 10, 4}));
  r.mode = 3;
  auto batch = make_op(r);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  EXPECT_EQ(batch->out().shape, (std::vector<std::int64_t>{5, 10, 4}));
  r.mode = 1;
  r.local_groups = 2;
  auto local = make_op(r);
  ASSERT_TRUE(local.ok()) << local.status().to_string();
  EXPECT_EQ(local->spec().rhs.shape[0], 2) << "the rhs holds the local groups only";
  r.local_groups = 4;
  EXPECT_FALSE(make_op(r).ok());
  r.local_groups.reset();
  r.mode = 4;
  EXPECT_FALSE(make_op(r).ok());
}

TEST(CliVerifyMatrix, IsSeededAndCoversEveryModeDtypeAndPattern) {
  MatrixOptions o;
  o.random_cases = 10;
  const auto a = build_matrix(o);
  EXPECT_EQ(a.size(), 10u + 3 * 3 * 7);
  const auto b = build_matrix(o);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].c.description, b[i].c.description);
  o.mode = 2;
  o.dtype = DType::kBF16;
  const auto only = build_matrix(o);
  EXPECT_EQ(only.size(), 10u + 7);
  for (const auto& c : only) {
    auto op = RaggedDot::create(c.c.spec);
    ASSERT_TRUE(op.ok()) << c.c.description;
    EXPECT_EQ(op->mode(), RaggedMode::kContracting) << c.c.description;
    EXPECT_EQ(c.c.spec.lhs.dtype, DType::kBF16);
  }
}

}  // namespace
}  // namespace ragdot::cli
