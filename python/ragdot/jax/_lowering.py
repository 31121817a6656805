"""Lower JAX's own ragged-dot primitive to ragdot: existing programs that call jax.lax.ragged_dot
or ragged_dot_general (and the ragged dots JAX's autodiff makes of them) run ragdot's Group-GEMM
custom call instead of XLA's lowering (on CUDA, a dense expansion), with no code changes.

    import ragdot.jax
    ragdot.jax.enable()            # or: with ragdot.jax.enabled(): ... ; or RAGDOT_JAX_LOWERING=1

The rule is registered per platform (cpu, and cuda where this build has the CUDA handler) with
jax.interpreters.mlir.register_lowering. An op ragdot does not take (a dtype, a layout, a group
offset given to jax.lax) keeps the lowering JAX had, and says why once per reason when
RAGDOT_JAX_DEBUG=1. Lowerings are cached with compiled functions, so enable() and disable()
clear JAX's caches: functions compiled before lower again on their next call.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Dict, Optional

import jax
import jax.numpy as jnp
from jax.interpreters import mlir

from .. import _native
from .._dims import normalize
from .._signature import dtype_name
from ._call import Static, core, out_aval

_PLATFORMS = {"cpu": "cpu", "CUDA": "cuda"}  # ragdot's handler platform -> JAX's lowering platform
_state: Dict[str, Optional[object]] = {}  # platform -> JAX's entry there before (None: its default)
_reported = set()


def _primitive():
    from jax._src.lax import lax as lax_internal  # the primitive itself has no public name

    return lax_internal.ragged_dot_general_p


def _jax_rules():
    # JAX keeps its rules in these tables; enable() needs the rule it replaces, to fall back to it
    # for ops ragdot does not take and to put it back on disable().
    from jax._src.interpreters import mlir as mlir_internal

    return mlir_internal._lowerings, mlir_internal._platform_specific_lowerings


def _debug(reason: str) -> None:
    if os.environ.get("RAGDOT_JAX_DEBUG") == "1" and reason not in _reported:
        _reported.add(reason)
        print(f"ragdot.jax: keeping JAX's lowering for a ragged dot: {reason}", file=sys.stderr)


def _default_precision(precision) -> bool:
    """Whether jax.lax left the precision at its default (None, or Precision.DEFAULT for both)."""
    items = precision if isinstance(precision, (tuple, list)) else (precision,)
    return all(p is None or p == jax.lax.Precision.DEFAULT for p in items)


def narrowed_operand(platform: str, lhs_dtype, rhs_dtype, precision) -> Optional[int]:
    """Which operand (0: lhs, 1: rhs) to round from float32 to bfloat16, or None.

    JAX's autodiff of a bf16 x bf16 -> float32 ragged dot transposes it into float32 x bf16
    products (the float32 cotangent against a bf16 operand), which only ragdot's SIMT kernels
    take. On CUDA, at JAX's default precision, the float32 operand is rounded to bfloat16 so that
    the product runs on the tensor cores with float32 accumulation, as ragdot.jax's own backward
    does (mixed-precision training's usual choice). Any other precision (Precision.HIGH or
    HIGHEST, a dot algorithm), float16 partners (whose range a float32 cotangent may exceed) and
    the CPU keep the float32 operand as it is. The rounding applies to every such product, not
    only to autodiff's: a forward bf16 x float32 ragged dot at default precision is rounded too.
    """
    if platform != "cuda" or not _default_precision(precision):
        return None
    f32, bf16 = jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)
    if jnp.dtype(lhs_dtype) == f32 and jnp.dtype(rhs_dtype) == bf16:
        return 0
    if jnp.dtype(rhs_dtype) == f32 and jnp.dtype(lhs_dtype) == bf16:
        return 1
    return None


def _make_rule(platform: str, fallback: Callable) -> Callable:
    def rule(ctx, lhs, rhs, group_sizes, *args, ragged_dot_dimension_numbers, precision=None,
             preferred_element_type=None, group_offset=None, **kwargs):
        def keep(reason):
            _debug(reason)
            return fallback(ctx, lhs, rhs, group_sizes, *args, ragged_dot_dimension_numbers=ragged_dot_dimension_numbers,
                            precision=precision, preferred_element_type=preferred_element_type,
                            group_offset=group_offset, **kwargs)

        if args or group_offset is not None:
            return keep("a group offset given to jax.lax (use ragdot.jax.ragged_dot's group_offset)")
        try:
            dims = normalize(ragged_dot_dimension_numbers)
            out_dtype = dtype_name(ctx.avals_out[0].dtype)
            static = Static(dims, out_dtype, -1)
            out_aval(static, *ctx.avals_in)  # the library's own checks: dtypes, shapes, dims
        except (TypeError, ValueError, KeyError) as err:
            return keep(str(err).splitlines()[0])

        narrow = narrowed_operand(platform, ctx.avals_in[0].dtype, ctx.avals_in[1].dtype, precision)

        def via_ragdot(a, b, g):
            if narrow == 0:
                a = a.astype(jnp.bfloat16)
            elif narrow == 1:
                b = b.astype(jnp.bfloat16)
            return core(static)(a, b, g, jnp.zeros((1,), jnp.int32))

        return mlir.lower_fun(via_ragdot, multiple_results=False)(ctx, lhs, rhs, group_sizes)

    return rule


def enable() -> None:
    """Lower every jax.lax.ragged_dot(_general) to ragdot from now on (idempotent)."""
    if _state:
        return
    from ._targets import register

    register()
    prim = _primitive()
    default, specific = _jax_rules()
    for handler_platform, platform in _PLATFORMS.items():
        if handler_platform not in _native.ffi_handlers:
            continue
        previous = specific.get(platform, {}).get(prim)
        _state[platform] = previous
        entry = previous or default[prim]
        mlir.register_lowering(prim, _make_rule(platform, getattr(entry, "rule", entry)), platform=platform)
    jax.clear_caches()


def disable() -> None:
    """Give jax.lax.ragged_dot(_general) back to JAX's own lowering."""
    if not _state:
        return
    prim = _primitive()
    _, specific = _jax_rules()
    for platform, previous in _state.items():
        if previous is None:
            specific.get(platform, {}).pop(prim, None)
        else:
            specific[platform][prim] = previous  # JAX's own entry, as it was
    _state.clear()
    jax.clear_caches()


def is_enabled() -> bool:
    return bool(_state)


@contextlib.contextmanager
def enabled():
    """with ragdot.jax.enabled(): ... -- ragdot's lowering inside, the previous state after."""
    was = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()
