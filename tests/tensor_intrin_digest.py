"""Run as a script in a fresh interpreter: import TVM's tensor intrinsics (the standard import, or
crosstune's with ``crosstune``) and print JSON with the seconds it took and a digest of every registered
intrinsic (name and structural hashes of its description and implementation).

    python tests/tensor_intrin_digest.py standard|crosstune
"""

import hashlib
import json
import sys
import time


def main(how: str) -> None:
    import tvm  # noqa: F401
    from tvm.s_tir import _tensor_intrin, meta_schedule  # noqa: F401
    from tvm_ffi import structural_hash

    registered = []
    register = _tensor_intrin.TensorIntrin.register

    def recording(name, desc, impl, override=False):
        registered.append((name, int(structural_hash(desc)), int(structural_hash(impl))))
        return register(name, desc, impl, override)

    _tensor_intrin.TensorIntrin.register = staticmethod(recording)
    started = time.perf_counter()
    if how == "crosstune":
        from crosstune.tvm import require_tvm

        require_tvm()
    else:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    seconds = time.perf_counter() - started
    digest = hashlib.sha256(repr(sorted(registered)).encode()).hexdigest()
    print(json.dumps({"how": how, "seconds": seconds, "intrinsics": len(registered), "sha256": digest}))


if __name__ == "__main__":
    main(sys.argv[1])
