"""Real network definitions in plain PyTorch (random weights, nothing downloaded), and their
conversion to Relax and MetaSchedule tasks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import CrosstuneError


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet18(nn.Module):
    """He et al. 2016, ImageNet layout (224x224 input, 1000 classes)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """Sandler et al. 2018 (width 1.0, 224x224 input)."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cin = 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for i in range(repeats):
                layers.append(_InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class BertEncoderLayer(nn.Module):
    """One BERT-base encoder layer (hidden 768, 12 heads, FFN 3072), written out with matmuls so that
    every operator is visible to the compiler."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.ffn1 = nn.Linear(hidden, ffn)
        self.ffn2 = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).reshape(batch, seq, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = torch.softmax(q @ k.transpose(-1, -2) / self.head_dim ** 0.5, dim=-1)
        context = (scores @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ffn2(torch.nn.functional.gelu(self.ffn1(x))))


@dataclass(frozen=True)
class NetworkDef:
    name: str
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]


NETWORKS: dict[str, NetworkDef] = {
    "resnet18": NetworkDef("resnet18", ResNet18, (1, 3, 224, 224)),
    "mobilenet_v2": NetworkDef("mobilenet_v2", MobileNetV2, (1, 3, 224, 224)),
    "bert_layer": NetworkDef("bert_layer", BertEncoderLayer, (1, 128, 768)),
}


def get_network(name: str) -> NetworkDef:
    if name not in NETWORKS:
        raise CrosstuneError(f"unknown network {name!r}; known networks: {', '.join(NETWORKS)}")
    return NETWORKS[name]


def network_instance(name: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The network in eval mode with seeded random weights, and a seeded random input."""
    net = get_network(name)
    torch.manual_seed(seed)
    model = net.build().eval()
    return model, torch.randn(*net.input_shape)


def to_relax(model: nn.Module, example: torch.Tensor):
    """torch.export -> Relax IRModule (weights bound as constants)."""
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(model, (example,))
    return from_exported_program(exported)


def fuse_like_compile_relax(mod, target):
    """The fusion ``ms.relax_integration.compile_relax`` applies before it looks up the database, so
    that the extracted tasks are exactly the functions it will find tuned (or silently not)."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline

    try:
        dispatch = pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    passes = [*dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
              relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR()]
    with target:
        return tvm.transform.Sequential(passes)(mod)


def extract_network_tasks(name: str, target):
    """(relax module before fusion, MetaSchedule tasks) of a network. ``compile_relax`` needs the
    module from before fusion (given a fused one it silently runs untuned); extraction needs it fused."""
    from tvm.s_tir import meta_schedule as ms

    model, example = network_instance(name)
    mod = to_relax(model, example)
    return mod, ms.relax_integration.extract_tasks(fuse_like_compile_relax(mod, target), target)
