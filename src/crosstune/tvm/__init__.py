"""Everything that imports TVM lives in this package, imported lazily, so that reading data, training
and evaluating work without TVM installed (``pip install 'crosstune[tvm]'`` adds it)."""

import contextlib
import inspect
import linecache
import sys

from ..errors import CrosstuneError


def require_tvm():
    """Import TVM or explain how to install it."""
    try:
        import tvm  # noqa: F401
        from tvm.s_tir import meta_schedule  # noqa: F401
    except ImportError as err:
        raise CrosstuneError(f"this command needs TVM ({err}); install it with: pip install 'crosstune[tvm]'") from None
    _import_tensor_intrinsics()
    return tvm


def _import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (every MetaSchedule TuneContext does) in seconds, not a minute.

    Its 124 intrinsics are TVMScript functions, and the parser calls ``inspect.stack()`` for each. The
    standard one reads source context for every frame of the (deep, import-machinery) stack and scans
    sys.modules for frames without a module file: 37-45 s on this project's 2-core machine, once per
    process that tunes or measures. The parser reads only the frames and one line of context, which
    a walk over the frames with linecache gives in 3.5 s; the registered intrinsics are the same
    (structural hashes of all 124 compared, docs/BENCHMARKS.md)."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    with _light_inspect_stack():
        import tvm.s_tir.tensor_intrin  # noqa: F401


@contextlib.contextmanager
def _light_inspect_stack():
    def stack(context: int = 1) -> list[inspect.FrameInfo]:
        frame, frames = sys._getframe(1), []
        while frame is not None:
            code = frame.f_code
            line = linecache.getline(code.co_filename, frame.f_lineno) if context else ""
            frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                            [line] if line else None, 0 if line else None))
            frame = frame.f_back
        return frames

    standard = inspect.stack
    inspect.stack = stack
    try:
        yield
    finally:
        inspect.stack = standard
