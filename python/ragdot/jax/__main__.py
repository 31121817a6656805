"""python -m ragdot.jax SCRIPT [ARGS...]: runs a JAX program unchanged, with jax.lax.ragged_dot
lowered to ragdot (the same as RAGDOT_JAX_LOWERING=1 with `import ragdot.jax` in the program)."""
import runpy
import sys

from ._lowering import enable


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    enable()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
