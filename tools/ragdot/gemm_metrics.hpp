// The figures a measured GEMM is reported in, and how they are printed.
#pragma once

#include <string>

#include "moe_case.hpp"

namespace ragdot::cli {

// TFLOP/s on the useful work (2 * rows * k * n), whatever a backend spends on padding.
double useful_tflops(const MoeGemmCase& gemm, double seconds);
// GB/s of the bytes a perfect implementation moves (MoeGemmCase::min_bytes).
double min_bytes_gbps(const MoeGemmCase& gemm, DType out_dtype, double seconds);

std::string format_duration(double seconds);  // "845 us", "12.3 ms", "1.25 s"
std::string format_rate(double value);        // three significant digits: "0.123", "45.6", "611"
std::string format_speedup(double ratio);     // "2.41x"
std::string format_bytes(double bytes);       // "1.88 GiB"

}  // namespace ragdot::cli
