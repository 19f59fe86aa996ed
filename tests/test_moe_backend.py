"""The engine's MoE backend (run/serve --moe-backend, a point's `moe_backend`) chooses which
measured MoE table prices the routed experts, and a point's CUDA-graph sizes pad each
attention-DP rank's decode batch (serve --graph-sizes/--graph-pad, a point's graph_sizes
and graph_pad): ignoring either moves the numbers these tests hold."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import xpusim
from xpusim.cost.kernel_tables import all_tables, kernel_table
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.serving.engines import engine
from xpusim.serving.options import Engine
from xpusim.serving.replica import Padding

R1 = dict(chips=8, tp=8, ep=8, dp_attention=True, precision="nvfp4", kv_precision="fp8",
          attention_precision="fp8", prompt=2048, gen=2)  # fmt: skip


def _expert_layer_s(backend: str | None, batch: int) -> float:
    """One MoE layer's two expert GEMMs in DeepSeek-R1's decode step on 8 B200 (EP 8,
    attention DP: `batch` tokens enter the experts)."""
    result = xpusim.simulate("deepseek-r1", "b200", batch=batch, moe_backend=backend, **R1)
    ops = [o for o in result.ops if o.phase == "decode" and ".experts." in o.name
           and o.kind == "matmul"]  # fmt: skip
    assert len(ops) == 2
    return sum(o.time_s for o in ops)


def test_the_wideep_tables_hold_deepseek_ep8_power_law_rows():
    wideep = [t for t in all_tables() if t.kind == "moe" and t.backend == "WIDEEP"]
    assert {t.measured_on for t in wideep} == {"b200", "b300", "gb200"}
    for t in wideep:
        assert "wideep_moe_perf" in t.source and "power_law_1.01" in t.source
        assert t.key_scope == "nvfp4@WIDEEP" and np.all(t.fractions <= 1)
    cutlass = kernel_table("b200", DType.NVFP4, "nvfp4", kind="moe")
    assert cutlass.backend == "CUTLASS" and "balanced" in cutlass.source


def test_the_backend_chooses_the_table_that_prices_the_experts():
    """At 1,024 tokens over EP 8 WIDEEP's measured layer is 217 us (power-law routing, the
    busiest rank), CUTLASS's 286-303 us (balanced); each backend's ops follow its own."""
    wideep, cutlass = _expert_layer_s("WIDEEP", 1024), _expert_layer_s(None, 1024)
    assert wideep == pytest.approx(216.7e-6, rel=0.08)  # + xpusim's chance imbalance
    assert cutlass > 1.25 * wideep
    assert _expert_layer_s("CUTLASS", 1024) == cutlass  # the default, named
    assert _expert_layer_s("wideep", 1024) == wideep  # TensorRT-LLM's names, any case


def test_a_backend_without_a_table_keeps_the_default_one():
    """DEEPGEMM has no B200 table: its experts take CUTLASS's, the fallback kernel_keys
    names."""
    assert _expert_layer_s("DEEPGEMM", 1024) == _expert_layer_s(None, 1024)


def _toml_rows(name: str) -> dict[tuple, float]:
    """A table of moe/nvidia-trtllm.toml by name: its rows, keyed by all but the time."""
    import tomllib

    from xpusim.cost.kernel_tables import TABLES_DIR

    data = tomllib.loads((TABLES_DIR / "moe/nvidia-trtllm.toml").read_text())
    table = next(t for t in data["table"] if t["name"] == name)
    return {tuple(r[:-1]): r[-1] for r in table["rows"]}


@pytest.mark.parametrize("chip", ["h100-sxm", "h200-sxm"])
def test_the_marlin_rows_are_tritons_or_marlins_compute_rate(chip):
    """vLLM's Marlin MXFP4 MoE at gpt-oss's shapes (backend MARLIN) is derived, not measured
    (benchmarks/moe_kernel_tables.py marlin_table): each row is the Triton kernel's measured
    row of the same key, or the two expert GEMMs' FLOPs at one Marlin compute rate per split,
    whichever is longer. So decode batches cost Triton's, and an 8k-token prompt's layer at
    TP 2 about twice Triton's."""
    derived = {t.name for t in all_tables() if t.derived}
    assert derived == {"derived-vllm-moe-w4a16-mxfp4-marlin-h100-sxm",
                       "derived-vllm-moe-w4a16-mxfp4-marlin-h200-sxm"}  # the rest measured
    marlin = _toml_rows(f"derived-vllm-moe-w4a16-mxfp4-marlin-{chip}")
    triton = _toml_rows(f"aiconfigurator-vllm-moe-w4a16-mxfp4-{chip}")
    common = marlin.keys() & triton.keys()  # the Triton table keeps TP 1 and 4 of TP 1-8
    assert len(common) > 100 and {key[5] for key in marlin} == {1, 2, 4, 8}
    rates: dict[tuple, list[float]] = {}
    for key in common:
        tokens, hidden, inter, topk, _, tp, _ = key
        assert marlin[key] >= triton[key] * (1 - 5e-4)  # 4 significant digits written
        if marlin[key] > triton[key] * (1 + 5e-4):
            rates.setdefault((inter, tp), []).append(
                2 * tokens * topk * 3 * hidden * inter / tp / (marlin[key] * 1e-6))
        if tokens <= 64:
            assert marlin[key] == triton[key]
    assert rates
    for found in rates.values():
        assert max(found) / min(found) < 1.001  # one rate a split: FLOPs / it
        assert 1.5e14 < found[0] < 2.3e14  # Marlin on Hopper: about 0.2 of BF16 peak
    prefill = (8192, 2880, 2880, 4, 128, 4, 1)
    assert marlin[prefill] > 1.9 * triton[prefill]


def test_marlin_prices_a_long_prompt_s_experts_slower_than_triton():
    """gpt-oss-120b on 4 H100s under vLLM (TP 4, a split both tables hold rows of): with
    --moe-backend MARLIN (the InferenceMAX launches' VLLM_MXFP4_USE_MARLIN=1) an 8k-token
    prompt's TTFT grows by the experts' slower compute, one client's decode stays within
    1%."""
    def served(backend: str | None) -> tuple[float, float]:
        result = xpusim.serve("gpt-oss-120b", "h100-sxm", chips=4, tp=4, engine="vllm-0.11",
                              concurrency=1, prompt=8192, gen=64, requests=2,
                              moe_backend=backend)  # fmt: skip
        return result.ttft_s.mean, result.tpot_s.mean

    (marlin_ttft, marlin_tpot), (triton_ttft, triton_tpot) = served("MARLIN"), served(None)
    assert marlin_ttft > 1.4 * triton_ttft
    assert marlin_tpot == pytest.approx(triton_tpot, rel=0.01)


def test_an_unknown_backend_is_refused_by_name():
    with pytest.raises(UserError, match="WIDEEP"):
        xpusim.simulate("deepseek-r1", "b200", batch=8, moe_backend="wide-ep", **R1)


def _padding(ranks: int) -> Padding:
    """Padding over a step cost whose token ops take 1 us a token (one stage)."""
    tokens = np.arange(1, 4097, dtype=float)
    cost = SimpleNamespace(max_tokens=4096, token_stage_s=tokens[:, None] * 1e-6,
                           token_energy_j=tokens * 1e-3)  # fmt: skip
    found = Padding.of("decode", [128, 256, 384, 512], cost, 1, engine("trtllm").padded, ranks)
    assert found is not None
    return found


def test_each_attention_dp_rank_pads_its_own_batch():
    """1,240 sequences over 8 ranks are 155 a rank, each run as a graph of 256: the step
    costs 2,048 tokens' token ops. On one rank 1,240 is past the largest graph (512) and
    runs unpadded; 300 pads to 384."""
    assert _padding(8).extra(1240, decode_only=True)[0] == pytest.approx((2048 - 1240) * 1e-6)
    assert _padding(1).extra(1240, decode_only=True) is None  # past the largest: as it is
    assert _padding(1).extra(300, decode_only=True)[0] == pytest.approx(84e-6)
    assert _padding(8).extra(1240, decode_only=False) is None  # a step with a prefill


def test_graph_settings_are_checked():
    assert Engine(graph_sizes="512, 128,256").captured == [128, 256, 512]
    with pytest.raises(UserError, match="graph_sizes"):
        Engine(graph_sizes="0,128")
    with pytest.raises(UserError, match="decode"):
        Engine(graph_pad="decodes")


@pytest.fixture(scope="module")
def mlperf_point():
    from xpusim.validation.points import load_points

    wanted = "mlperf51-nvidia-b200x8-deepseek-r1-server-tpot-mean"
    return next(p for p in load_points() if p.id == wanted)


def _tpot(point, **drop) -> float:
    from xpusim.validation.adapters import predict

    return predict(dataclasses.replace(point, setup={**point.setup, **drop})).value


def test_the_mlperf_rows_settings_reach_serve(mlperf_point):
    """The rows state WIDEEP and graphs of 128-512 with padding; dropping either changes
    the predicted TPOT at the run's rate (padding adds work; WIDEEP's measured experts are
    cheaper than CUTLASS's at this batch)."""
    setup = mlperf_point.setup
    assert setup["moe_backend"] == "WIDEEP" and setup["graph_sizes"] == [128, 256, 384, 512]
    stated = _tpot(mlperf_point)
    assert _tpot(mlperf_point, graph_sizes=None, graph_pad=None) < 0.95 * stated
    assert _tpot(mlperf_point, moe_backend=None) > 1.05 * stated


def test_the_wideep_rows_count_the_busiest_rank_s_pairs():
    """WIDEEP's rows were timed on the busiest rank under power-law routing (alpha 1.01):
    their M is that rank's expected pairs, as the ops they price count theirs, so the skew
    is not counted twice (test_the_backend_chooses_the_table_that_prices_the_experts holds
    the layer at its measured 217 us)."""
    from xpusim.compiler.moe_expert import power_law_busiest

    wideep = next(t for t in all_tables() if t.backend == "WIDEEP" and t.measured_on == "b200")
    assert wideep.rows_m[0] == power_law_busiest(128, 256, 8, 8, 1.01) > 128 * 8 / 8 * 1.2


def test_the_command_line_takes_a_backend_in_any_case():
    """`--moe-backend marlin` is MARLIN, as the API takes TensorRT-LLM's names in any case;
    on an H100 an 8k-token prompt of gpt-oss-20b's experts then costs Marlin's."""
    import json

    from click.testing import CliRunner

    from xpusim.cli import cli

    def ttft(*backend: str) -> float:
        done = CliRunner().invoke(cli, ["run", "gpt-oss-20b", "--chip", "h100-sxm", "--prompt",
                                        "8192", "--gen", "2", "--json", *backend])  # fmt: skip
        assert done.exit_code == 0, done.output
        return json.loads(done.output)["ttft_s"]

    assert ttft("--moe-backend", "marlin") == ttft("--moe-backend", "MARLIN") > 1.2 * ttft()


# --- the MoE backend an engine picks by itself (engines.toml moe_backend_default) ---

DSR1_FP8, DSR1_NVFP4 = "deepseek-ai/DeepSeek-R1-0528", "nvidia/DeepSeek-R1-0528-FP4"
ONE = dict(chips=8, tp=8, concurrency=1, requests=3, prompt=512, gen=24)


def _picked_note(result) -> str:
    return next((n for n in result.notes if "moe_backend_default" in n), "")


def test_sglang_runs_deepseek_experts_on_flashinfer_trtllm_on_blackwell_by_itself():
    """SGLang PR #11816: DeepseekV3ForCausalLM on SM100 with fp8/modelopt_fp4 and no
    --moe-runner-backend takes flashinfer_trtllm; serve without --moe-backend prices it so,
    the same as naming it, and says which it picked."""
    for model, precision in ((DSR1_FP8, "fp8"), (DSR1_NVFP4, "nvfp4")):
        by_itself = xpusim.serve(model, "b200", engine="sglang", precision=precision, **ONE)
        named = xpusim.serve(model, "b200", engine="sglang", precision=precision,
                             moe_backend="trtllm", **ONE)  # fmt: skip
        cutlass = xpusim.serve(model, "b200", engine="sglang", precision=precision,
                               moe_backend="CUTLASS", **ONE)  # fmt: skip
        assert "TRTLLM" in _picked_note(by_itself) and not _picked_note(named)
        assert by_itself.tpot_s.mean == named.tpot_s.mean != cutlass.tpot_s.mean
        assert not _picked_note(cutlass)


def test_the_engine_default_stays_off_where_the_engine_does_not_pick_it():
    """Hopper (not SM100), another engine, and SGLang 0.4 (older than the rule)."""
    for chip, name in (("h200-sxm", "sglang"), ("b200", "vllm"), ("b200", "trtllm"),
                       ("b200", "sglang-0.4")):
        result = xpusim.serve(DSR1_FP8, chip, engine=name, precision="fp8", **ONE)
        assert not _picked_note(result), (chip, name)


def test_nvfp4_decodes_faster_than_fp8_under_sglang_on_b200():
    """InferenceX's 8-B200 SGLang runs at one client (published.json inferencex-dsr1-b200-
    sglang-*-1k1k-c1): NVFP4 EP 8 5.87 ms a token against FP8 7.18. With CUTLASS's rows (no
    engine default) xpusim had NVFP4 the slower at tp 8."""
    fp8 = xpusim.serve(DSR1_FP8, "b200", engine="sglang", precision="fp8", **ONE)
    nvfp4 = xpusim.serve(DSR1_NVFP4, "b200", engine="sglang", precision="nvfp4", **ONE)
    assert nvfp4.tpot_s.mean < fp8.tpot_s.mean


def test_a_moe_default_rule_has_exactly_its_keys():
    from xpusim.serving.engines import MoeDefault

    rule = dict(backend="TRTLLM", chips=["b200"], model_types=["deepseek_v3"], weights=["nvfp4"])
    assert MoeDefault.of(rule).applies("b200", "deepseek_v3", "nvfp4")
    assert not MoeDefault.of(rule).applies("b200", "deepseek_v3", "fp8-block")
    with pytest.raises(ValueError, match="moe_backend_default keys"):
        MoeDefault.of({**rule, "vendor": "NVIDIA"})


def test_a_prompt_that_fills_the_whole_prompt_budget_is_explained():
    """TensorRT-LLM's in-flight batching runs each context whole: an 8k prompt under its
    8,192-token max_num_tokens never fits beside another client's decode, so the clients
    take turns; serve says so, and a larger --token-budget lets them batch."""
    load = dict(chips=8, tp=8, precision="fp8", concurrency=8, requests=8, prompt=8192,
                gen=16, engine="trtllm")  # fmt: skip
    tight = xpusim.serve(DSR1_FP8, "b200", **load)
    roomy = xpusim.serve(DSR1_FP8, "b200", token_budget=16384, **load)
    assert any("waits until at most 0 others decode" in n for n in tight.notes)
    assert not any("others decode" in n for n in roomy.notes)
    assert roomy.ttft_s.mean < tight.ttft_s.mean


def test_a_searched_plan_is_chosen_on_the_backend_the_engine_picks():
    """Without --tp the plan is searched; it is searched on the engine's own MoE backend, as
    when the run names it (here CUTLASS's rows choose TP 8, trtllm-gen's two replicas of
    TP 4: a plan searched on CUTLASS and then priced on trtllm-gen was neither)."""
    load = dict(chips=8, precision="nvfp4", engine="sglang", concurrency=4, requests=8,
                prompt=1024, gen=32)  # fmt: skip
    by_itself = xpusim.serve(DSR1_NVFP4, "b200", **load)
    named = xpusim.serve(DSR1_NVFP4, "b200", moe_backend="TRTLLM", **load)
    assert by_itself.plan == named.plan and by_itself.tpot_s.mean == named.tpot_s.mean
