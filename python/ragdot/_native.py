"""The compiled module, with a clear error when the package was not built."""
try:
    from ._ragdot import *  # noqa: F401,F403
    from ._ragdot import SpecArgs, __version__, ffi_handlers  # noqa: F401
except ImportError as e:  # pragma: no cover - only without a build
    raise ImportError(
        "ragdot's native module ragdot._ragdot is missing: install the package with `pip install .` "
        "from the ragdot source tree, or build it with -DRAGDOT_BUILD_PYTHON=ON and put "
        "<build>/python_package on PYTHONPATH") from e
