"""Data-parallel training across two "nodes" on this machine, joined over loopback with torchrun's
multi-node flags: the same command a user runs on two machines, with 127.0.0.1 as the master."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

pytestmark = [pytest.mark.ddp, pytest.mark.slow]

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ddp
def test_two_nodes_over_loopback_end_with_identical_weights(tmp_path, tiny_dataset):
    port = _free_port()
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                               f"--node-rank={rank}", "--master-addr=127.0.0.1", f"--master-port={port}",
                               str(HERE / "ddp_train.py"), str(tiny_dataset), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"})
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=600) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(err[-2000:] for _, err in outputs)
    rank0, rank1 = (load_file(str(tmp_path / f"rank{r}.safetensors")) for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
