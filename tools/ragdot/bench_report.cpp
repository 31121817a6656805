#include "bench_report.hpp"

#include <cmath>

#include "gemm_metrics.hpp"
#include "json_writer.hpp"
#include "machine_info.hpp"
#include "ragdot/version.hpp"
#include "text_table.hpp"

namespace ragdot::cli {

const BenchRecord* BenchResults::find(std::size_t case_index, const std::string& backend) const {
  for (const auto& r : records) {
    if (r.case_index == case_index && r.backend == backend) return &r;
  }
  return nullptr;
}

namespace {

void write_case(JsonWriter& j, const MoeGemmCase& c) {
  j.key("model");
  j.value(c.model);
  j.key("gemm");
  j.value(c.gemm);
  j.key("tokens");
  j.value(c.tokens);
  j.key("skew");
  j.value(c.skew);
  j.key("shrink");
  j.value(c.shrink);
  j.key("m");
  j.value(c.m);
  j.key("k");
  j.value(c.k);
  j.key("n");
  j.value(c.n);
  j.key("groups");
  j.value(c.groups);
  j.key("active_groups");
  j.value(c.active_groups());
  j.key("largest_group");
  j.value(c.largest_group());
  j.key("useful_flops");
  j.value(c.useful_flops());
}

void write_measurement(JsonWriter& j, const MoeGemmCase& c, const BackendMeasurement& m) {
  const double sec = m.timing.median_seconds;
  j.key("min_bytes");
  j.value(c.min_bytes(m.out_dtype));
  j.key("backend");
  j.value(m.backend);
  j.key("variant");
  j.value(m.variant);
  j.key("plan");
  j.value(m.plan_line);
  j.key("memory");
  j.value(memory_space_name(m.space));
  j.key("median_seconds");
  j.value(sec);
  j.key("min_seconds");
  j.value(m.timing.min_seconds);
  j.key("samples");
  j.value(m.timing.samples);
  j.key("runs_per_sample");
  j.value(m.timing.runs_per_sample);
  j.key("tflops");
  j.value(useful_tflops(c, sec));
  j.key("gbps");
  j.value(min_bytes_gbps(c, m.out_dtype, sec));
}

std::string short_model(const std::string& name) {
  // "qwen3-30b-a3b" -> "qwen3": the family name keeps chart labels narrow
  const auto dash = name.find('-');
  return dash == std::string::npos || name.rfind("deepseek", 0) == 0 || name.rfind("llama4", 0) == 0
             ? name
             : name.substr(0, dash);
}

}  // namespace

std::string bench_json(const BenchResults& r) {
  JsonWriter j;
  j.begin_object();
  j.key("tool");
  j.value("ragdot bench");
  j.key("version");
  j.value(version_string());
  j.key("timestamp");
  j.value(utc_timestamp());
  j.key("machine");
  j.begin_object();
  j.key("host");
  j.value(host_name());
  j.key("cpu");
  j.value(cpu_model());
  j.key("threads");
  j.value(hardware_threads());
  j.key("description");
  j.value(machine_description());
  j.end_object();
  j.key("dtype");
  j.value(dtype_name(r.dtype));
  j.key("seed");
  j.value(static_cast<unsigned long long>(r.seed));
  j.key("backends");
  j.begin_array();
  for (const auto& b : r.backends) j.value(b);
  j.end_array();
  j.key("results");
  j.begin_array();
  for (const auto& rec : r.records) {
    const MoeGemmCase& c = r.cases[rec.case_index];
    j.begin_object();
    write_case(j, c);
    if (rec.measured) {
      write_measurement(j, c, *rec.measured);
    } else {
      j.key("backend");
      j.value(rec.backend);
    }
    j.key("check");
    if (rec.check) {
      j.begin_object();
      j.key("passed");
      j.value(rec.check->passed);
      j.key("rel_error");
      j.value(rec.check->rel_error);
      j.key("tolerance");
      j.value(rec.check->tolerance);
      j.end_object();
    } else {
      j.null();
    }
    j.key("error");
    if (rec.error.empty()) j.null();
    else j.value(rec.error);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.text() + "\n";
}

BarChart bench_chart(const BenchResults& r) {
  BarChart chart;
  chart.title = "ragdot bench: " + std::string(dtype_name(r.dtype)) + " ragged dot, TFLOP/s on useful FLOPs";
  chart.subtitle = machine_description();
  chart.value_axis = "TFLOP/s";
  chart.series = r.backends;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const MoeGemmCase& c = r.cases[i];
    BarGroup g;
    std::string model = short_model(c.model);
    if (c.shrink > 1) model.append("/").append(std::to_string(c.shrink));
    g.label_lines = {model,
                     c.gemm + format(" skew %g", c.skew), format("M=%lld", (long long)c.m)};
    for (const auto& b : r.backends) {
      const BenchRecord* rec = r.find(i, b);
      g.values.push_back(rec && rec->measured ? useful_tflops(c, rec->measured->timing.median_seconds) : NAN);
    }
    chart.groups.push_back(std::move(g));
  }
  return chart;
}

}  // namespace ragdot::cli
