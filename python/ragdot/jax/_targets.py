"""Registers ragdot's XLA FFI handlers with JAX, once, for the platforms this build has."""
import functools

import jax

from .. import _native

TARGET = "ragdot_ragged_dot_general"


@functools.cache
def register() -> str:
    for platform, capsule in _native.ffi_handlers.items():
        jax.ffi.register_ffi_target(TARGET, capsule, platform=platform)
    return TARGET
