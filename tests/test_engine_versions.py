"""Engine versions (serving/engines.toml `base` and versioned `kernels`): each vLLM profile
is priced with the kernel tables of the release it names, the default `vllm` profile is the
newest release timed under CUDA graphs (0.19), and the scored points that ran 0.11 keep
their own profile (`vllm-0.11`, priced with the nearest timed release, 0.14)."""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources

import pytest

import xpusim
from xpusim.cost.kernel_tables import all_tables
from xpusim.errors import UserError
from xpusim.serving.engines import engine, engines

VERSIONED = re.compile(r"^vllm-(\d+\.\d+)-")
"""A kernel named with the vLLM release that timed it (benchmarks/vllm_kernel_tables.py
kernel_name)."""


def _kernel_releases(profile: str) -> set[str]:
    """The releases (major.minor) whose timed kernels price `profile`'s versioned kernels,
    read from the tables' own engine_version."""
    names = set(engines()[profile].kernels)
    return {re.sub(r"^vLLM (\d+\.\d+)\..*", r"\1", t.engine.removeprefix("vllm "))
            for t in all_tables() if t.kernel in names and VERSIONED.match(t.kernel)}


@pytest.mark.parametrize(("profile", "release"), [("vllm", "0.19"), ("vllm-0.11", "0.14")])
def test_each_vllm_profile_is_priced_with_the_release_it_names(profile: str, release: str):
    """`vllm` takes vLLM 0.19.0's block-FP8 linear and fused MoE, `vllm-0.11` 0.14.0's (the
    nearest timed to 0.11), on both Hopper chips; no profile mixes two releases of one
    kernel."""
    assert _kernel_releases(profile) == {release}
    kernels = [k for k in engines()[profile].kernels if VERSIONED.match(k)]
    assert {k.split("-", 2)[2] for k in kernels} == {"w8a8-block-fp8", "fused-moe"}
    for kernel in kernels:
        chips = {c for t in all_tables() if t.kernel == kernel for c in t.chips}
        assert chips == {"h100-sxm", "h200-sxm"}, kernel


def test_every_versioned_kernel_table_carries_the_version_its_name_says():
    """A table's kernel name and its engine_version agree, so a profile that lists a name is
    priced with that release's timings."""
    versioned = [t for t in all_tables() if VERSIONED.match(t.kernel)]
    assert len(versioned) >= 8  # gemm and moe, two releases, two chips
    for table in versioned:
        release = VERSIONED.match(table.kernel).group(1)
        assert table.engine.startswith(f"vllm vLLM {release}."), table.name


def test_the_current_profile_writes_only_what_its_release_changed():
    """`vllm` is `vllm-0.11` (its base) but for its version, kernels (and the chips that
    run FlashInfer's MXFP4 MoE: the SM100 family from 0.13) and async scheduling
    (overlapped: on by default since vLLM PR #27614), each with its source."""
    new, old = engine("vllm"), engine("vllm-0.11")
    changed = {f.name for f in dataclasses.fields(new)
               if getattr(new, f.name) != getattr(old, f.name)}  # fmt: skip
    assert changed <= {"name", "base", "version", "about", "overlapped", "source", "limits_source",
                       "graph_source", "kernels", "kernels_source", "nvidia_only",
                       "nvidia_only_source", "chips_only", "chips_only_source"}  # fmt: skip
    assert new.base == "vllm-0.11" and not old.base
    assert new.overlapped and not old.overlapped
    assert (new.limits, new.graph_sizes, new.graph_max) == (old.limits, old.graph_sizes,
                                                            old.graph_max)  # fmt: skip
    assert new.version.startswith("0.19") and old.version.startswith("0.11")


def test_an_unknown_release_is_refused_naming_the_closest_profile():
    with pytest.raises(UserError, match=r"vllm-0\.11"):
        engine("vllm-0.12")


def _published_points() -> list[dict]:
    text = resources.files("xpusim.validation").joinpath("published.json").read_text()
    return json.loads(text)["points"]


def test_published_vllm_v1_points_keep_the_release_they_ran():
    """Every scored point on a vLLM V1 profile ran 0.11-0.12 or does not say (the ml-energy
    task files of February 2026, AMD's MLPerf v5.1 harness, vLLM TPU 0.12): all are priced as
    before, by `vllm-0.11`; none takes the current `vllm` profile's newer kernels."""
    v1 = [p for p in _published_points() if str(p.get("engine_profile", "")).startswith("vllm")
          and p["engine_profile"] != "vllm-v0"]
    assert len(v1) >= 200
    assert {p["engine_profile"] for p in v1} == {"vllm-0.11"}
    for point in v1:
        ran = str(point.get("engine_version") or "")
        assert not re.search(r"\b0\.(1[3-9]|2\d)\b", ran), ran


def _decode_tpot_s(model: str, profile: str) -> float:
    result = xpusim.serve(model, "h100-sxm", chips=2, tp=2, engine=profile, concurrency=4,
                          requests=8, prompt=256, gen=32)  # fmt: skip
    return result.tpot_s.mean


def test_qwen3_32b_fp8_decodes_about_as_fast_as_bf16_on_current_vllm():
    """Qwen3-32B-FP8 on 2 H100 (TP 2) at 4 clients, both with a BF16 KV cache (the FP8
    checkpoint names none: the engines' auto): under vLLM 0.19's timed block-FP8 linears
    (22.9 us for 6144 x 4096 at M 1 on an H100, BF16's TensorRT-LLM rows 22.1) FP8 decodes
    within 1% of BF16; under 0.14's (35.4 us) over 10% slower, the reason `vllm-0.11` is
    kept apart for the points that ran that release."""
    bf16 = _decode_tpot_s("Qwen/Qwen3-32B", "vllm")
    assert _decode_tpot_s("Qwen/Qwen3-32B-FP8", "vllm") <= 1.01 * bf16
    assert _decode_tpot_s("Qwen/Qwen3-32B-FP8", "vllm-0.11") > 1.1 * _decode_tpot_s(
        "Qwen/Qwen3-32B", "vllm-0.11")


def test_the_engine_option_names_every_profile():
    """`--engine`'s help lists every profile engines.toml defines (it left out sglang-0.4
    and trtllm-cpp), so a user finds a version without reading the TOML."""
    from xpusim.serving.options import Engine

    help_text = next(f for f in dataclasses.fields(Engine) if f.name == "engine").metadata["help"]
    named = set(re.findall(r"[a-z][a-z0-9.-]*[a-z0-9]", help_text))
    assert set(engines()) <= named


def test_the_docs_name_vllm_kernels_that_exist():
    """A vLLM kernel the docs name in backticks is one a table times: the unversioned
    `vllm-w8a8-block-fp8` lingered in docs/serving.md after the tables took their release's
    name."""
    from pathlib import Path

    docs = Path(__file__).parent.parent / "docs"
    named = {m for page in docs.glob("*.md") for m in
             re.findall(r"`(vllm-[a-z0-9.-]*(?:w8a8-block-fp8|fused-moe|mxfp4-moe))`",
                        page.read_text())}  # fmt: skip
    assert named
    assert named <= {t.kernel for t in all_tables()}
