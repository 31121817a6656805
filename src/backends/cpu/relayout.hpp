// Strided copies into contiguous buffers: canonicalization's relayouts and mode 2's lhs transpose.
#pragma once

#include <cstdint>

#include "core/problem.hpp"

namespace ragdot::cpu {

// dst (contiguous, row-major over r.sizes) = src viewed through r.src_strides. Elements of
// `elem_bytes` bytes (2, 4 or 8). Parallel over the outer dims with `threads` threads.
void relayout(const void* src, std::size_t elem_bytes, const core::Relayout& r, void* dst, int threads);

}  // namespace ragdot::cpu
