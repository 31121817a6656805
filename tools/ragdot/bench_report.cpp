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
  j.field("model", c.model);
  j.field("gemm", c.gemm);
  j.field("tokens", c.tokens);
  j.field("skew", c.skew);
  j.field("shrink", c.shrink);
  j.field("m", c.m);
  j.field("k", c.k);
  j.field("n", c.n);
  j.field("groups", c.groups);
  j.field("active_groups", c.active_groups());
  j.field("largest_group", c.largest_group());
  j.field("useful_flops", c.useful_flops());
}

void write_measurement(JsonWriter& j, const MoeGemmCase& c, const BackendMeasurement& m) {
  const double sec = m.timing.median_seconds;
  j.field("min_bytes", c.min_bytes(m.out_dtype));
  j.field("backend", m.backend);
  j.field("variant", m.variant);
  j.field("plan", m.plan_line);
  j.field("memory", memory_space_name(m.space));
  j.field("median_seconds", sec);
  j.field("min_seconds", m.timing.min_seconds);
  j.field("samples", m.timing.samples);
  j.field("runs_per_sample", m.timing.runs_per_sample);
  j.field("tflops", useful_tflops(c, sec));
  j.field("gbps", min_bytes_gbps(c, m.out_dtype, sec));
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
  j.field("tool", "ragdot bench");
  j.field("version", version_string());
  j.field("timestamp", utc_timestamp());
  j.key("machine");
  j.begin_object();
  j.field("host", host_name());
  j.field("cpu", cpu_model());
  j.field("threads", hardware_threads());
  j.field("description", machine_description());
  j.end_object();
  j.field("dtype", dtype_name(r.dtype));
  j.field("seed", static_cast<unsigned long long>(r.seed));
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
      j.field("backend", rec.backend);
    }
    j.key("check");
    if (rec.check) {
      j.begin_object();
      j.field("passed", rec.check->passed);
      j.field("rel_error", rec.check->rel_error);
      j.field("tolerance", rec.check->tolerance);
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
