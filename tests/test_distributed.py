"""Which process-group backend a torchrun job gets (the GPU path itself runs in benchmarks/gpu_transfer.sh)."""

from crosstune.distributed import backend_for


def test_nccl_only_when_every_local_rank_has_its_own_gpu():
    assert backend_for("cpu", 2, 1) == "gloo"
    assert backend_for("cuda", 2, 2) == "nccl"
    assert backend_for("cuda:0", 1, 1) == "nccl"
    # NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): they share it over gloo
    assert backend_for("cuda", 2, 1) == "gloo"
