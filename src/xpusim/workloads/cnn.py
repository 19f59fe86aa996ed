"""Bottleneck ResNets (ResNet-50, -101, -152) from a config, built as IR without torch.

He et al. 2016 (Table 1) with torchvision's layout ("ResNet v1.5": the stride on the 3 x 3
convolution): a 7 x 7 stem and a 3 x 3 max pool, then stages of bottleneck blocks (1 x 1,
3 x 3, 1 x 1 convolutions, each followed by a batch norm, the last widened `expansion`
times, a projection shortcut where the shape changes), a global average pool and one
linear classifier. The ops are emitted as the torch.export importer lowers the same module
(workloads/lowering.py), so the compiler passes (batch norms folded into convolutions,
vector ops fused) and the cost model see one graph either way; a test holds the two equal.
A config is data (`zoo/resnet-50.json`): the stages, the stem and the image size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from xpusim.errors import UserError, config_count
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.tensor import Role
from xpusim.workloads.imported import ImportedModel

if TYPE_CHECKING:  # the builder's, imported when a graph is built: `xpusim run` on an LLM
    from xpusim.workloads.lowering import Lowering, Value  # loads only the config

SOURCE = "resnet config"  # the `source` attribute of the ops built here


@dataclass(frozen=True)
class Stage:
    width: int  # channels of the 1 x 1 and 3 x 3 convolutions; the block's output is wider
    blocks: int
    stride: int  # of the first block's 3 x 3 convolution and its shortcut


@dataclass(frozen=True)
class ResNetConfig:
    name: str
    scenario_kind: ClassVar[str] = "cnn"  # what simulates it (scenarios/registry.py)
    stages: tuple[Stage, ...]
    stem_channels: int = 64
    expansion: int = 4
    image_size: int = 224
    num_classes: int = 1000

    @property
    def param_count(self) -> int:
        """Convolution and classifier weights, and the batch norms' scale and shift."""
        count, cin = 3 * self.stem_channels * 49 + 2 * self.stem_channels, self.stem_channels
        for stage in self.stages:
            cout = stage.width * self.expansion
            for block in range(stage.blocks):
                count += cin * stage.width + 9 * stage.width**2 + stage.width * cout
                count += 2 * (2 * stage.width + cout)
                if block == 0 and (stage.stride != 1 or cin != cout):
                    count += cin * cout + 2 * cout
                cin = cout
        return count + cin * self.num_classes + self.num_classes

    @property
    def active_param_count(self) -> int:
        """Every weight runs for every image."""
        return self.param_count

    def model(self, batch: int, dtype: DType) -> ImportedModel:
        """One forward pass of `batch` images, as an imported model is simulated."""
        inputs = {"images": (batch, 3, self.image_size, self.image_size)}
        return ImportedModel(self.name, build_resnet(self, batch, dtype), SOURCE, inputs)


def resnet_from_json(data: dict, model_id: str, origin: str) -> ResNetConfig:
    """A zoo file's fields, checked: `stages` as [width, blocks, stride] triples."""
    known = {"stages", "stem_channels", "expansion", "image_size", "num_classes"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"{origin}: unknown field {unknown[0]!r}; a resnet has {sorted(known)}")
    triples = data.get("stages")
    if not isinstance(triples, list) or not all(isinstance(t, list) and len(t) == 3
                                                for t in triples):  # fmt: skip
        raise UserError(f"{origin}: stages must be a list of [width, blocks, stride] triples")
    stages = tuple(Stage(*(config_count(v, f"stages[{i}].{part}", origin, MAX_SIZE)
                           for part, v in zip(("width", "blocks", "stride"), t, strict=True)))
                   for i, t in enumerate(triples))  # fmt: skip
    sizes = {k: config_count(data[k], k, origin, MAX_SIZE)
             for k in sorted(known - {"stages"}) if k in data}  # fmt: skip
    if not stages:
        raise UserError(f"{origin}: stages must hold at least one [width, blocks, stride]")
    if sum(s.blocks for s in stages) > MAX_BLOCKS:
        raise UserError(f"{origin}: more than {MAX_BLOCKS:,} blocks in all; at most that many "
                        "can be simulated")  # fmt: skip
    return ResNetConfig(model_id, stages, **sizes)


MAX_BLOCKS = 10_000
"""The most bottleneck blocks a ResNet may have (ResNet-152 has 50): each is its own ops."""
MAX_SIZE = 2**20
"""The largest width, stride, image side or class count: past any network's (1,048,576),
and short of float overflow in a convolution's FLOPs."""


def build_resnet(cfg: ResNetConfig, batch: int, dtype: DType) -> Graph:
    from xpusim.workloads.lowering import Lowering

    net = _Builder(Lowering(cfg.name), batch, dtype)
    x = net.value("images", (3, cfg.image_size, cfg.image_size), Role.ACTIVATION)
    x = net.relu("stem", net.conv_bn("stem.conv", x, cfg.stem_channels, 7, 2))
    x = net.max_pool("stem.pool", x, 3, 2)
    for i, stage in enumerate(cfg.stages):
        for j in range(stage.blocks):
            x = net.bottleneck(f"layer{i + 1}.{j}", x, stage.width, cfg.expansion,
                               stage.stride if j == 0 else 1)  # fmt: skip
    channels = x.shape[1]
    pooled = net.value("avgpool.out", (channels,), Role.ACTIVATION)
    net.lw.reduction("avgpool", "adaptive_avg_pool2d", x, [pooled], 1)
    logits = net.value("fc.out", (cfg.num_classes,), Role.ACTIVATION)
    weight = net.lw.tensor("fc.weight", (cfg.num_classes, channels), dtype, Role.WEIGHT)
    bias = net.lw.tensor("fc.bias", (cfg.num_classes,), dtype, Role.WEIGHT)
    net.lw.matmul("fc", "linear", pooled, weight, logits, bias=bias, transpose_b=True)
    return net.lw.finish()


@dataclass
class _Builder:
    lw: Lowering
    batch: int
    dtype: DType

    def value(self, name: str, shape: tuple[int, ...], role: Role) -> Value:
        """A per-image activation (the batch in front) or, for weights, as given."""
        full = (self.batch, *shape) if role is Role.ACTIVATION else shape
        return self.lw.tensor(name, full, self.dtype, role)

    def conv_bn(self, name: str, x: Value, cout: int, kernel: int, stride: int) -> Value:
        """A bias-free convolution padded to keep the grid at stride 1, then a batch norm."""
        from xpusim.workloads.lowering import BATCHNORM_FLOPS

        cin, height, width = x.shape[1:]
        pad = kernel // 2
        size = ((height + 2 * pad - kernel) // stride + 1, (width + 2 * pad - kernel) // stride + 1)
        weight = self.value(f"{name}.weight", (cout, cin, kernel, kernel), Role.WEIGHT)
        out = self.value(f"{name}.out", (cout, *size), Role.ACTIVATION)
        self.lw.conv(name, "conv2d", x, weight, None, out)
        params = [self.value(f"{name}.bn.{p}", (cout,), Role.WEIGHT)
                  for p in ("weight", "bias", "running_mean", "running_var")]  # fmt: skip
        normed = self.value(f"{name}.bn.out", out.shape[1:], Role.ACTIVATION)
        self.lw.norm(f"{name}.bn", "batch_norm", out, params, normed, BATCHNORM_FLOPS, "batch")
        return normed

    def relu(self, name: str, x: Value) -> Value:
        out = self.value(f"{name}.relu", x.shape[1:], Role.ACTIVATION)
        self.lw.elementwise(f"{name}.relu", "relu", [x], [out], 1)
        return out

    def max_pool(self, name: str, x: Value, kernel: int, stride: int) -> Value:
        channels, height, width = x.shape[1:]
        pad = kernel // 2
        size = ((height + 2 * pad - kernel) // stride + 1, (width + 2 * pad - kernel) // stride + 1)
        out = self.value(f"{name}.out", (channels, *size), Role.ACTIVATION)
        self.lw.pool(name, "max_pool2d", x, [out], kernel * kernel)
        return out

    def bottleneck(self, name: str, x: Value, width: int, expansion: int, stride: int) -> Value:
        cout = width * expansion
        shortcut = x
        if stride != 1 or x.shape[1] != cout:
            shortcut = self.conv_bn(f"{name}.downsample", x, cout, 1, stride)
        y = self.relu(f"{name}.1", self.conv_bn(f"{name}.conv1", x, width, 1, 1))
        y = self.relu(f"{name}.2", self.conv_bn(f"{name}.conv2", y, width, 3, stride))
        y = self.conv_bn(f"{name}.conv3", y, cout, 1, 1)
        summed = self.value(f"{name}.add", y.shape[1:], Role.ACTIVATION)
        self.lw.elementwise(f"{name}.add", "add", [y, shortcut], [summed], 1)
        return self.relu(f"{name}.3", summed)
