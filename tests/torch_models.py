"""Real models built here, not downloaded, for the importer tests (needs the torch extra).

ResNet-50 is written out (torchvision does not import beside the CPU torch build), after He
et al. 2016, Table 1, with torchvision's layout (stride on the 3x3 conv, "ResNet v1.5").
The Llama is transformers' own LlamaForCausalLM at a small config with random weights.
Builders are cached: each model is traced or exported once per test session.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

import xpusim
from xpusim.workloads.imported import ImportedModel

RESNET_INPUT = (2, 3, 224, 224)
LLAMA_CONFIG = dict(
    hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2,
    num_hidden_layers=2, vocab_size=1000, max_position_embeddings=512, use_cache=False,
)  # fmt: skip
LLAMA_INPUT = (2, 16)  # batch, tokens
ONNX_SHAPES = {"resnet50": None, "llama": {"input_ids": LLAMA_INPUT}}  # what --input-shape gives
LLAMA_KWARGS = {"logits_to_keep": 1}  # logits of the last position only, as servers and the zoo


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = 4 * width
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            conv = nn.Conv2d(cin, cout, 1, stride, bias=False)
            self.down = nn.Sequential(conv, nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )  # fmt: skip
        blocks, cin = [], 64
        for width, count, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = 4 * width
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def meta_resnet50() -> tuple[nn.Module, torch.Tensor]:
    with torch.device("meta"):
        return ResNet50().eval(), torch.zeros(RESNET_INPUT)


def meta_llama() -> tuple[nn.Module, torch.Tensor]:
    with torch.device("meta"):
        module = LlamaForCausalLM(LlamaConfig(**LLAMA_CONFIG))
    return module, torch.zeros(LLAMA_INPUT, dtype=torch.long, device="meta")


@cache
def resnet50() -> ImportedModel:
    module, x = meta_resnet50()
    return xpusim.from_torch(module, (x,), name="resnet50")


@cache
def llama() -> ImportedModel:
    module, ids = meta_llama()
    return xpusim.from_torch(module, (ids,), LLAMA_KWARGS, name="llama")


def _randomized(module: nn.Module) -> nn.Module:
    """Random norm statistics and scales: the ONNX exporter merges identical initializers
    (all-ones norm weights), which would make its weight list shorter than the module's."""
    torch.manual_seed(0)
    for m in module.modules():
        for name in ("weight", "bias", "running_mean"):
            t = getattr(m, name, None)
            if isinstance(t, torch.Tensor) and t.dim() == 1:
                t.data.uniform_(0.5, 1.5)
        if isinstance(m, nn.BatchNorm2d):
            m.running_var.uniform_(0.5, 1.5)
    return module.eval()


@cache
def onnx_files(folder: Path) -> dict[str, Path]:
    """ResNet-50 and the Llama exported by torch.onnx (opset 23: its Attention op); the
    Llama with symbolic batch and sequence dimensions, as models are usually exported."""
    with torch.device("cpu"):
        resnet = _randomized(ResNet50())
        llama_module = _randomized(LlamaForCausalLM(LlamaConfig(**LLAMA_CONFIG)))
    paths = {"resnet50": folder / "resnet50.onnx", "llama": folder / "llama.onnx"}
    with torch.no_grad():
        torch.onnx.export(resnet, (torch.zeros(RESNET_INPUT),), paths["resnet50"], dynamo=True,
                          opset_version=23, external_data=True, verbose=False)  # fmt: skip
        ids = torch.zeros(LLAMA_INPUT, dtype=torch.long)
        dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", min=2, max=512)}
        torch.onnx.export(llama_module, (ids,), paths["llama"], kwargs=LLAMA_KWARGS, dynamo=True,
                          opset_version=23, external_data=True, verbose=False,
                          dynamic_shapes={"input_ids": dims, "logits_to_keep": None})  # fmt: skip
    return paths
