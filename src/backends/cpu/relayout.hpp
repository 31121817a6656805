// Copies into contiguous buffers: canonicalization's relayouts, mode 2's lhs transpose, and rows
// gathered through an index (PlanOptions::lhs_gather_rows, where a backend gathers first).
#pragma once

#include <cstdint>

#include "core/problem.hpp"

namespace ragdot::cpu {

// dst (contiguous, row-major over r.sizes) = src viewed through r.src_strides. Elements of
// `elem_bytes` bytes (2, 4 or 8). Parallel over the outer dims with `threads` threads.
void relayout(const void* src, std::size_t elem_bytes, const core::Relayout& r, void* dst, int threads);

// dst row i (`row_bytes` bytes, rows contiguous) = table row index[i] for i < rows, the table's
// rows `row_bytes` apart; an index outside [0, table_rows) gives a row of zero bits (0.0 in every
// float type).
void gather_rows(const void* table, std::int64_t table_rows, std::size_t row_bytes, const std::int32_t* index,
                 std::int64_t rows, void* dst);

}  // namespace ragdot::cpu
