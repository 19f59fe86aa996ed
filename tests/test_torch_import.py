"""The PyTorch front end on real models: FLOPs against the zoo builder and torch's own
counter, fusion and precision passes, unknown ops and untraceable modules, every chip."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch_models  # noqa: E402
from cli_run import run_cli  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

import xpusim  # noqa: E402
from xpusim.compiler.fusion import fuse  # noqa: E402
from xpusim.compiler.precision import recast  # noqa: E402
from xpusim.errors import UserError  # noqa: E402
from xpusim.ir.dtypes import DType  # noqa: E402
from xpusim.ir.op import OpKind  # noqa: E402
from xpusim.ir.tensor import Role  # noqa: E402
from xpusim.workloads.transformer import StepShape, build_step  # noqa: E402
from xpusim.workloads.transformer_config import config_from_hf  # noqa: E402


def counted_flops(module, *args, **kwargs) -> int:
    """FLOPs by torch.utils.flop_counter (matmuls, convolutions, attention) in one eager pass.

    SDPA runs on its math backend, whose matmuls the counter sees: it has no formula for the
    fused CPU kernel. Like ours, the counter scores every query-key pair given a mask. The
    rotary tables depend on positions only, so compilation folds them into constants: their
    matmul (in some transformers versions) is left out.
    """
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        module(*args, **kwargs)
    by_module = counter.get_flop_counts()
    folded = sum(sum(v.values()) for k, v in by_module.items() if k.endswith("rotary_emb"))
    return counter.get_total_flops() - folded


def test_resnet50_matches_flop_counter_and_published_count():
    module, x = torch_models.meta_resnet50()
    graph = torch_models.resnet50().graph
    assert graph.matrix_flops == counted_flops(module, x)
    per_image = graph.matrix_flops / x.shape[0]
    assert per_image == pytest.approx(2 * 4.09e9, rel=0.01)  # torchvision: 4.09 GMACs
    kinds = [op.kind for op in graph]
    assert kinds.count(OpKind.CONV) == 53 and kinds.count(OpKind.MATMUL) == 1
    weights = graph.tensor_bytes(Role.WEIGHT) - 4 * sum(  # BN running stats are buffers
        op.inputs[3].numel + op.inputs[4].numel for op in graph if op.attr("norm") == "batch"
    )
    assert weights == 4 * 25_557_032  # parameters of torchvision's resnet50, fp32


def test_batch_norms_fold_into_convolutions():
    graph = fuse(torch_models.resnet50().graph)
    assert not [op for op in graph if op.attr("norm") == "batch"]
    convs = [op for op in graph if op.kind is OpKind.CONV]
    assert len(convs) == 53 and all(op.inputs[2].name.endswith("folded_bias") for op in convs)


def test_relus_and_residual_sums_run_in_the_convolutions_epilogues():
    unfused = torch_models.resnet50().graph
    graph = fuse(unfused)
    # left apart: the stem's ReLU with its max pool (a pool changes the shape), the average pool
    assert [op.kind for op in graph].count(OpKind.ELEMENTWISE) == 2
    with_shortcut = [op for op in graph if op.kind is OpKind.CONV and len(op.inputs) == 4]
    assert len(with_shortcut) == 16  # each block's last convolution adds its shortcut
    # every FLOP but the folded batch norms' is still counted; each fused output is written
    # once instead of written, read back and written again
    folded = sum(op.vector_flops for op in unfused if op.attr("norm") == "batch")
    assert graph.flops == pytest.approx(unfused.flops - folded, rel=1e-12)
    assert graph.bytes < fuse_without_epilogues_bytes(unfused)


def fuse_without_epilogues_bytes(graph) -> float:
    """The bytes of the batch-norm-folded graph with every vector op its own kernel."""
    from xpusim.compiler.fusion import _fold_batch_norms

    return sum(op.bytes for op in _fold_batch_norms(graph.ops))


def test_zoo_resnet50_is_the_imported_one():
    """workloads/cnn.py builds what torch.export gives for the same module, op for op."""
    imported = torch_models.resnet50()
    native = xpusim.model("resnet-50").model(imported.batch, DType.FP32)
    assert native.inputs["images"] == tuple(torch_models.RESNET_INPUT)
    pairs = ((native.graph, imported.graph), (fuse(native.graph), fuse(imported.graph)))
    for built, traced in pairs:
        assert [op.kind for op in built] == [op.kind for op in traced]
        assert built.matrix_flops == traced.matrix_flops
        assert built.flops == pytest.approx(traced.flops, rel=1e-12)
        assert built.bytes == pytest.approx(traced.bytes, rel=1e-12)
        assert built.tensor_bytes(Role.WEIGHT) == traced.tensor_bytes(Role.WEIGHT)


def test_small_llama_matches_zoo_builder_and_flop_counter():
    imported = torch_models.llama().graph
    module = LlamaForCausalLM(LlamaConfig(**torch_models.LLAMA_CONFIG)).eval()  # eager: on CPU
    ids = torch.zeros(torch_models.LLAMA_INPUT, dtype=torch.long)
    assert imported.matrix_flops == counted_flops(module, ids, **torch_models.LLAMA_KWARGS)

    cfg = config_from_hf(module.config.to_dict(), "small-llama", "test")
    batch, tokens = torch_models.LLAMA_INPUT
    zoo = build_step(cfg, StepShape(batch, tokens, tokens), DType.FP32)
    # HF passes a materialized causal mask to SDPA, so all query-key pairs are scored; the
    # builder counts the causal half: 4 b h d (s^2 - s(s+1)/2) per layer more.
    masked = tokens * tokens - tokens * (tokens + 1) / 2
    extra = 4 * batch * cfg.num_heads * cfg.head_dim * masked * cfg.num_layers
    assert imported.matrix_flops == zoo.matrix_flops + extra
    assert imported.flops == pytest.approx(zoo.flops, rel=0.01)
    compiled = fuse(imported)
    assert compiled.bytes == pytest.approx(zoo.bytes, rel=0.01)
    weights = compiled.tensor_bytes(Role.WEIGHT)
    assert weights == pytest.approx(cfg.param_count * 4, rel=1e-3)  # + mask, rotary tables


def test_fusion_keeps_flops_and_only_removes_traffic():
    graph = torch_models.llama().graph
    fused = fuse(graph)
    assert fused.flops == pytest.approx(graph.flops, rel=1e-12)
    assert fused.bytes < graph.bytes
    assert len(fused) < len(graph)
    norms = [op for op in fused if "rsqrt" in str(op.attr("source"))]
    assert len(norms) == 5  # 2 per layer and the final one, each one op


def test_recast_sets_formats_and_drops_redundant_casts():
    graph = torch_models.llama().graph
    fp16 = recast(graph, DType.FP16, DType.INT8)
    dtypes = {(t.role, t.dtype) for op in fp16 for t in op.inputs + op.outputs}
    assert (Role.WEIGHT, DType.INT8) in dtypes and (Role.ACTIVATION, DType.FP16) in dtypes
    assert (Role.ACTIVATION, DType.INT64) in dtypes  # token ids keep their type
    assert not {d for _, d in dtypes} & {DType.FP32, DType.BF16}
    with pytest.raises(UserError, match="wider"):
        recast(graph, DType.INT8, DType.FP16)


def test_views_and_reshapes_cost_nothing():
    class Shuffle(torch.nn.Module):
        def forward(self, x):
            y = x.view(4, 8, 2).transpose(0, 1).reshape(8, 8).permute(1, 0).contiguous()
            return y.unsqueeze(0).flatten(1) + 1

    graph = xpusim.from_torch(Shuffle(), (torch.zeros(4, 16),)).graph
    assert [op.attr("source") for op in graph] == ["aten.add"]


def test_unknown_ops_are_listed_by_name_with_counts():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.kthvalue(x, 2).values + torch.kthvalue(x, 3).values + torch.median(x)

    with pytest.raises(UserError) as error:
        xpusim.from_torch(Odd(), (torch.zeros(4, 4),))
    message = str(error.value)
    assert "aten.kthvalue x2" in message and "aten.median x1" in message
    assert "\n" not in message


def test_context_managers_inline_and_control_flow_is_reported():
    class Guarded(torch.nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", enabled=False):
                y = x * 2
            with torch.no_grad():
                y = y.exp()
            return y + x

    graph = xpusim.from_torch(Guarded(), (torch.zeros(4, 4),)).graph
    assert [op.attr("source") for op in graph] == ["aten.mul", "aten.exp", "aten.add"]

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))

    with pytest.raises(UserError, match=r"1 op xpusim cannot cost yet: higher_order.cond x1"):
        xpusim.from_torch(Branchy(), (torch.zeros(4, 4),))


def test_untraceable_module_is_one_line_user_error():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(UserError, match=r"^torch.export could not trace DataDependent: ") as e:
        xpusim.from_torch(DataDependent(), (torch.ones(3),))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("model", ["resnet50", "llama"])
def test_simulates_on_every_chip(any_chip, model):
    imported = getattr(torch_models, model)()
    result = xpusim.simulate(imported, any_chip)
    assert result.latency_s > 0 and result.energy_j > 0 and result.fits
    assert result.avg_power_w <= any_chip.tdp_w.value
    floor = result.total_flops / max(any_chip.peak_ops_per_s[d].value
                                     for d in any_chip.peak_ops_per_s)  # fmt: skip
    assert result.latency_s >= floor
    assert result.throughput == pytest.approx(imported.batch / result.latency_s)


def test_saved_program_runs_and_inspects_from_the_command_line(capsys, tmp_path):
    module, ids = torch_models.meta_llama()
    program = torch.export.export(module, (ids,), kwargs=torch_models.LLAMA_KWARGS)
    path = tmp_path / "llama.pt2"
    torch.export.save(program, path)
    code, out, err = run_cli(capsys, "run", str(path), "--chip", "tpu-v4", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["source"] == "torch.export" and result["inputs"] == {"input_ids": [2, 16]}
    code, out, _ = run_cli(capsys, "inspect", str(path), "--json")
    listing = json.loads(out)
    assert listing["total_flops"] == pytest.approx(sum(op["flops"] for op in listing["ops"]))
    assert listing["total_bytes"] == pytest.approx(sum(op["bytes"] for op in listing["ops"]))
    code, out, _ = run_cli(capsys, "inspect", str(path), "--unfused")
    assert code == 0 and "aten.pow" in out
    code, out, err = run_cli(capsys, "run", str(path), "--chip", "h100-sxm", "--prompt", "64")
    assert code == 2 and "--prompt" in err and len(err.strip().splitlines()) == 1


def test_importers_load_lazily():
    code = ("import sys, xpusim.api, xpusim.cli; print(sorted({'torch', 'onnx', 'transformers'}"
            " & set(sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_llama_built_as_anyone_builds_it_imports():
    """use_cache=True is LlamaConfig's default: the model returns a DynamicCache, which
    torch.export cannot return; from_torch traces it without (one forward pass costs the
    same) and gets the graph of the use_cache=False model."""
    config = {k: v for k, v in torch_models.LLAMA_CONFIG.items() if k != "use_cache"}
    with torch.device("meta"):
        module = LlamaForCausalLM(LlamaConfig(**config))
    assert module.config.use_cache
    ids = torch.zeros(torch_models.LLAMA_INPUT, dtype=torch.long, device="meta")
    imported = xpusim.from_torch(module, (ids,), torch_models.LLAMA_KWARGS)
    assert imported.graph.matrix_flops == torch_models.llama().graph.matrix_flops


QWEN3_MOE = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                 vocab_size=1000, num_experts=8, num_experts_per_tok=2, head_dim=32)  # fmt: skip


def _qwen3_moe(batch: int, tokens: int):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    with torch.device("meta"):
        module = Qwen3MoeForCausalLM(Qwen3MoeConfig(**QWEN3_MOE))
    ids = torch.zeros(batch, tokens, dtype=torch.long, device="meta")
    return xpusim.from_torch(module, (ids,))


def test_an_moe_model_imports_with_its_router_and_grouped_experts():
    """A Qwen3-MoE built on the meta device as anyone builds it: the router's top-k, the
    sort of rows by expert, the per-expert counts and transformers' grouped expert matmuls
    lower; the experts' matmuls do the builder's work (every routed row through its
    expert's gate, up and down projections), and every expert is held in memory however
    few a trace touches."""
    cfg = config_from_hf({"model_type": "qwen3_moe", **QWEN3_MOE}, "q", "config.json")
    prefill = _qwen3_moe(2, 64)
    experts = [op for op in prefill.graph if op.kind is OpKind.MATMUL
               and op.inputs[1].shape[0] == cfg.num_experts]  # fmt: skip
    routed_rows = 2 * 64 * cfg.experts_per_token
    h, i = cfg.hidden_size, cfg.expert_width
    assert sum(op.matrix_flops for op in experts) == (
        cfg.num_layers * 2 * routed_rows * (h * 2 * i + i * h))  # fmt: skip
    one_token = _qwen3_moe(1, 1)
    held = [g.tensor_bytes(Role.WEIGHT) for g in (prefill.graph, one_token.graph)]
    assert held[1] == pytest.approx(cfg.param_count * 4, rel=1e-3)  # fp32, as built
    assert held[0] >= held[1]
    result = xpusim.simulate(one_token, "h100-sxm", precision="bf16")
    assert result.memory_bytes.weights == pytest.approx(cfg.param_count * 2, rel=1e-3)
