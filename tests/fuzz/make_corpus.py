#!/usr/bin/env python3
"""Writes the seed corpus of the ragged-dot fuzz target (tests/fuzz/corpus/).

Each seed is a byte string in the layout fuzz_ragged_dot.cpp decodes, in order:

  mode          1 + b % 3 (0: ragged non-contracting, 1: contracting, 2: batch)
  counts        bit 0: batch dims; bits 1-2: lhs free (m) dims; bits 3-4: contracting dims;
                bits 5-6: rhs free (n) dims (each capped at 2)
  sizes         one byte per dim (b % 8): batch..., m..., k..., n...
  groups        b % 6
  ragged pick   which dim of the ragged kind
  lhs perm      permutes the lhs axes (0: batch, m, k)
  rhs perm      permutes the rhs axes (0: batch, k, n, group)
  dtypes        lhs f32/bf16/f16 = b % 3, rhs = b / 3 % 3, preferred = b / 9 % 4 (0: none)
  gs flags      bit 0: int64; bit 1: full [b..., x..., g] shape; bit 2: group offset;
                bits 3-4: sizes pattern (0 split, 1 small signed, 2 huge, 3 exact split)
  local groups  b % (groups + 1)
  offset        < 0x80: b % (groups + 1); otherwise signed (0xff, 0xfe: INT32 max, min)
  exec flags    bits 0-1: ISA cap (best, scalar, avx512, avx512_bf16); bit 2: 2 threads;
                bits 3-6: buffer fault (0 none, 1 short lhs, 2 null out, 3 rhs moved by 2 bytes,
                4 short workspace, 5 short group sizes, 6 out overlaps lhs, 7 device group
                sizes, 8 no group offset)
  mutations     b % 5, then 3 bytes each: field, index, value (corrupts a shape, a dimension
                list, a dtype or the group offset)
  group sizes   the rest

Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# mode, counts, sizes..., groups, pick, lperm, rperm, dtypes, gsflags, local, offset, exec, nmut, [mut...], gs...
SEEDS = {
    # lhs f32[6,5] x rhs f32[3,5,4], group sizes split from the tail bytes
    "valid_ragged_dot_f32": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0x00, 0, 0, 0, 0, 2, 1, 3],
    # bf16 operands, f32 output, exact split, best ISA
    "valid_ragged_dot_bf16": [0, 0b0101010, 7, 6, 5, 4, 0, 0, 0, 1 + 3 * 1 + 9 * 1, 0x18, 0, 0, 0, 0, 1, 2, 3],
    # mode 2 (weight gradient), f16, group offset with 2 local groups
    "valid_contracting_offset": [1, 0b0101010, 5, 6, 3, 4, 0, 5, 7, 2 + 3 * 2, 0x04, 2, 1, 0, 0, 2, 2, 1],
    # mode 3 with one batch dim, permuted axes, int64 group sizes of full shape
    "valid_batch_permuted": [2, 0b0101011, 4, 3, 5, 2, 3, 0, 0, 9, 11, 0, 0x1b, 0, 0, 0x04, 0],
    # two m, k, n dims and a batch dim, permuted
    "valid_general_dims": [0, 0b1011111, 2, 2, 3, 2, 2, 3, 2, 2, 1, 77, 31, 0, 0x02, 0, 0, 0, 0],
    # negative group size
    "invalid_negative_group": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0x08, 0, 0, 0, 0, 0xf9, 2, 1],
    # group sizes that overflow int32/int64 sums
    "invalid_oversized_groups": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0x11, 0, 0, 0, 0, 1, 2, 3],
    # out-of-range contracting dimension
    "invalid_contracting_dim": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 9],
    # negative lhs dimension and a dtype that is not an operand type
    "invalid_shape_dtype": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xfd, 5, 0, 3],
    # group offset out of range at execute time
    "invalid_group_offset": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0x04, 2, 0xff, 0, 0, 2, 2],
    # short lhs buffer and null output at execute
    "invalid_buffers": [0, 0b0101010, 6, 5, 4, 3, 0, 0, 0, 0, 0, 0, 0, 1 << 3, 0, 2, 2],
    "invalid_null_out": [1, 0b0101010, 5, 6, 3, 4, 0, 0, 0, 0, 0, 0, 0, 2 << 3, 0, 2, 2],
    # an empty operand whose other dims are huge (found by the fuzzer: its row-major strides
    # overflowed int64 in canonicalize)
    "invalid_empty_huge_strides": [0x00, 0x25, 0xff, 0x0d, 0x18, 0x00, 0xff, 0x75, 0x75, 0x00, 0xfb, 0x00,
                                   0x41, 0x00, 0x01, 0xb6, 0x02, 0x04, 0x03, 0x01, 0x8a, 0x7e, 0x00, 0x00,
                                   0x06, 0x05, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x05, 0x04, 0x03],
    # an empty operand with a huge group sizes tensor (the target must not build it)
    "empty_operand_huge_group_sizes": [0x40, 0x7a, 0x07, 0x05, 0xf2, 0x04, 0x56, 0x00, 0x03, 0xf4,
                                       0xf3, 0xf4, 0xff, 0xff, 0xff, 0x01, 0xf4, 0x7d, 0x7d, 0x01,
                                       0x7d, 0x7d, 0x7d, 0xaa, 0x09, 0x7d, 0x7d, 0x7d, 0x74, 0xf4,
                                       0x45],
    # a ragged batch whose one product lands among f16's subnormals (found by the fuzzer: a
    # correctly rounded -2.09e-6 is 0.4% off, past the relative tolerance alone)
    "f16_subnormal_output": [0x02, 0x00, 0x01, 0x27, 0xea, 0xea, 0xea, 0x04, 0x3a, 0x20, 0x76, 0x75,
                             0x65, 0x20, 0x6b, 0x73, 0x20, 0x6e, 0x6f, 0x74, 0xea, 0xea, 0xea, 0xea,
                             0xea, 0xea, 0xea, 0xea, 0xea, 0xaa, 0xea, 0xea, 0x2b, 0xff],
}


def main():
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
