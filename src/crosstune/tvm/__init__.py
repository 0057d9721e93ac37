"""Everything that imports TVM lives in this package, imported lazily, so that reading data, training
and evaluating work without TVM installed (``pip install 'crosstune[tvm]'`` adds it)."""

from ..errors import CrosstuneError


def require_tvm():
    """Import TVM or explain how to install it."""
    try:
        import tvm  # noqa: F401
        from tvm.s_tir import meta_schedule  # noqa: F401
    except ImportError as err:
        raise CrosstuneError(f"this command needs TVM ({err}); install it with: pip install 'crosstune[tvm]'") from None
    return tvm
