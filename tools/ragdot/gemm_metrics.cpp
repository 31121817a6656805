#include "gemm_metrics.hpp"

#include <cmath>

#include "text_table.hpp"

namespace ragdot::cli {

double useful_tflops(const MoeGemmCase& gemm, double seconds) {
  return seconds > 0 ? gemm.useful_flops() / seconds / 1e12 : NAN;
}

double min_bytes_gbps(const MoeGemmCase& gemm, DType out_dtype, double seconds) {
  return seconds > 0 ? gemm.min_bytes(out_dtype) / seconds / 1e9 : NAN;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 1e-3) return format("%.1f us", seconds * 1e6);
  if (seconds < 1.0) return format("%.2f ms", seconds * 1e3);
  return format("%.2f s", seconds);
}

std::string format_rate(double value) {
  if (!std::isfinite(value)) return "-";
  if (value >= 100) return format("%.0f", value);
  if (value >= 10) return format("%.1f", value);
  if (value >= 1) return format("%.2f", value);
  return format("%.3f", value);
}

std::string format_speedup(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  return format(ratio >= 10 ? "%.1fx" : "%.2fx", ratio);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return format("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return format("%.1f MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return format("%.1f KiB", bytes / 1024.0);
  return format("%.0f B", bytes);
}

}  // namespace ragdot::cli
