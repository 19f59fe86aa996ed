"""State-space models (Mamba, Mamba-2): counted as transformers builds them, a scan op with
its own cost rule, and a constant state per sequence where a transformer keeps a KV cache."""

from __future__ import annotations

import pytest
from cli_run import config_file, refused, run_cli

import xpusim
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import config_from_hf

MAMBA = dict(model_type="mamba", hidden_size=256, num_hidden_layers=2, vocab_size=1000,
             state_size=16, expand=2, conv_kernel=4)  # fmt: skip
MAMBA2 = dict(model_type="mamba2", hidden_size=256, num_hidden_layers=2, vocab_size=1000,
              state_size=32, expand=2, conv_kernel=4, num_heads=8, head_dim=64, n_groups=2,
              chunk_size=64)  # fmt: skip


@pytest.mark.parametrize("fields", [MAMBA, MAMBA2, {**MAMBA, "use_bias": True},
                                    {**MAMBA2, "use_bias": True, "use_conv_bias": False},
                                    {"model_type": "mamba"}, {"model_type": "mamba2"}])  # fmt: skip
def test_counts_what_transformers_builds(fields):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model_type, rest = fields["model_type"], {k: v for k, v in fields.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(model_type, **rest)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    assert config_from_hf(hf.to_dict(), model_type, "config.json").param_count == built


@pytest.mark.parametrize("fields", [MAMBA, MAMBA2])
def test_a_decode_step_costs_the_same_at_any_context(fields):
    """The state is constant: a token at 100,000 tokens of context costs one at 100."""
    cfg = config_from_hf(fields, "m", "config.json")
    short, long = (xpusim.simulate(cfg, "h100-sxm", batch=4, prompt=p, gen=64)
                   for p in (100, 100_000))  # fmt: skip
    assert short.tpot_s == long.tpot_s
    assert short.decode_flops_per_step == long.decode_flops_per_step
    state = 2 * cfg.num_layers * (cfg.intermediate_size * cfg.ssm_state_size
                                  + cfg.ssm_conv_channels * (cfg.ssm_conv_kernel - 1))
    assert short.memory_bytes.kv_cache == long.memory_bytes.kv_cache == 4 * state


def test_the_scan_counts_its_algorithms_steps():
    """Mamba's selective scan: 8 vector FLOPs per channel, state and token, 6 per channel
    and token; Mamba-2's SSD prompt as matmuls in chunks, its decode as a state update."""
    mamba = config_from_hf(MAMBA, "m", "c")
    scans = [op for op in build_step(mamba, StepShape(3, 50, 50), DType.BF16)
             if op.kind is OpKind.SCAN]  # fmt: skip
    assert len(scans) == 2
    assert scans[0].matrix_flops == 0
    assert scans[0].vector_flops == 3 * 50 * 512 * (16 * 8 + 6)
    ssd = config_from_hf(MAMBA2, "m2", "c")
    heads, p, n = 8, 64, 32
    prefill = next(op for op in build_step(ssd, StepShape(3, 100, 100), DType.BF16)
                   if op.kind is OpKind.SCAN)  # fmt: skip
    assert prefill.matrix_flops == 3 * 100 * heads * (2 * 64 * (n + p) + 4 * n * p)
    decode = next(op for op in build_step(ssd, StepShape(3, 1, 101), DType.BF16)
                  if op.kind is OpKind.SCAN)  # fmt: skip
    assert decode.matrix_flops == 0
    assert decode.vector_flops == 3 * heads * p * (n * 5 + 6)


def test_prefill_matmuls_are_two_flops_per_weight_and_token():
    cfg = config_from_hf(MAMBA, "m", "c")
    tokens = 2 * 40
    graph = build_step(cfg, StepShape(2, 40, 40), DType.BF16)
    matmuls = sum(op.matrix_flops for op in graph if op.kind is OpKind.MATMUL)
    h, i, r, n = 256, 512, 16, 16  # time_step_rank "auto": ceil(256 / 16)
    per_token = h * 2 * i + i * (r + 2 * n) + r * i + i * h
    assert matmuls == 2 * tokens * cfg.num_layers * per_token + 2 * 2 * h * 1000  # + LM head


def test_a_mamba2_whose_heads_do_not_make_its_width_is_refused():
    with pytest.raises(UserError, match="'num_heads' x 'head_dim'"):
        config_from_hf({**MAMBA2, "num_heads": 6}, "m", "config.json")


@pytest.mark.parametrize("args, message", [
    (["run", "--chips", "2", "--tp", "2"], "tensor parallelism"),
    (["run", "--mode", "training"], "training a state-space model"),
])  # fmt: skip
def test_what_is_not_modelled_is_refused_in_one_line(capsys, tmp_path, args, message):
    command, *rest = args
    path = config_file(tmp_path, MAMBA)
    assert message in refused(capsys, command, path, "--chip", "h100-sxm", *rest)


def test_serve_runs_a_state_space_model(capsys, tmp_path):
    """Once refused; its scans are serve's state ops (tests/test_serve_state_models.py)."""
    path = config_file(tmp_path, MAMBA)
    code, out, err = run_cli(capsys, "serve", path, "--chip", "h100-sxm",
                             "--concurrency", "2", "--requests", "4")  # fmt: skip
    assert code == 0, err
    assert "TPOT" in out


def test_a_plan_search_splits_a_state_space_model_by_replicas_and_stages():
    cfg = config_from_hf(MAMBA, "m", "c")
    result = xpusim.simulate(cfg, "h100-sxm", chips=4, batch=8)
    assert result.plan["tp"] == 1


def test_an_imported_mamba_scans_as_one_op_per_layer():
    """transformers' Mamba loops over tokens in torch; from_torch traces its scan as one
    fused op per layer (workloads/torch_kernels.py), whose cost is the config's scan's."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in MAMBA.items() if k != "model_type"}
    with torch.device("meta"):
        module = transformers.MambaForCausalLM(transformers.MambaConfig(**fields))
    tokens = 24
    imported = xpusim.from_torch(module, (torch.zeros(3, tokens, dtype=torch.long,
                                                      device="meta"),))  # fmt: skip
    scans = [op for op in imported.graph.ops if op.kind is OpKind.SCAN]
    assert len(scans) == 2  # one per layer, not one step per token
    assert len(imported.graph.ops) < 40
    built = [op for op in build_step(config_from_hf(MAMBA, "m", "c"),
                                     StepShape(3, tokens, tokens), DType.BF16)
             if op.kind is OpKind.SCAN]  # fmt: skip
    assert scans[0].vector_flops == built[0].vector_flops
    assert scans[0].matrix_flops == 0


def test_the_scans_substitution_computes_what_transformers_computes():
    """On real tensors the fused op runs transformers' own scan: the same logits, through
    the custom op once per layer."""
    from unittest import mock

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from xpusim.workloads import torch_kernels

    fields = {k: v for k, v in MAMBA.items() if k != "model_type"}
    torch.manual_seed(0)
    module = transformers.MambaForCausalLM(transformers.MambaConfig(**fields)).eval()
    ids = torch.randint(0, 1000, (2, 12))
    scan, calls = torch_kernels._original_scan(), []

    def counted(*args, **kwargs):
        calls.append(1)
        return scan(*args, **kwargs)

    with torch.no_grad():
        plain = module(ids, use_cache=False).logits
        with mock.patch.object(torch_kernels, "_original_scan", lambda: counted), \
                torch_kernels.substituted():  # fmt: skip
            fused = module(ids, use_cache=False).logits
    assert len(calls) == fields["num_hidden_layers"]
    assert torch.equal(plain, fused)
