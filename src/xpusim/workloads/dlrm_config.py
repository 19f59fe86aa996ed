"""A DLRM-style recommendation model's architecture, read from a JSON config.

Dense features go through a bottom MLP; each sparse feature looks up `pooling` rows of its
embedding table and sums them (a multi-hot embedding bag); a feature interaction combines the
bottom MLP's output with the pooled embeddings; a top MLP scores the result. The interaction
is `dot` (DLRM: pairwise dot products of all feature vectors), `cat` (concatenation) or
`dcn` (DCNv2's low-rank cross layers over the concatenation, as in MLPerf's DLRM-v2).

The config format (zoo files and user files with `"_xpusim": {"kind": "dlrm"}`):

    {"dense_features": 13, "bottom_mlp": [512, 256, 128],
     "tables": [{"rows": 40000000, "dim": 128, "pooling": 3, "count": 1}, ...],
     "interaction": "dcn", "dcn_layers": 3, "dcn_low_rank": 512,
     "top_mlp": [1024, 1024, 512, 256, 1]}

A missing or malformed field is a UserError naming it (`tables[3].rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import ClassVar

from xpusim.errors import UserError, closest, config_count

INTERACTIONS = ("dot", "cat", "dcn")


@dataclass(frozen=True)
class TableSpec:
    rows: int
    dim: int
    pooling: int  # rows looked up and summed per sample (multi-hot)


@dataclass(frozen=True)
class DLRMConfig:
    name: str
    scenario_kind: ClassVar[str] = "recsys"  # what simulates it (scenarios/registry.py)
    dense_features: int
    bottom_mlp: tuple[int, ...]
    tables: tuple[TableSpec, ...]
    interaction: str
    top_mlp: tuple[int, ...]
    dcn_layers: int = 0
    dcn_low_rank: int = 0

    @property
    def features(self) -> int:
        """Vectors that meet in the interaction: the bottom MLP's output and one per table."""
        return 1 + len(self.tables)

    @property
    def concat_width(self) -> int:
        return self.bottom_mlp[-1] + sum(t.dim for t in self.tables)

    @property
    def interaction_width(self) -> int:
        """Width of the top MLP's input."""
        if self.interaction == "dot":  # dense vector plus the strictly lower triangle of X X^T
            f = self.features
            return self.bottom_mlp[-1] + f * (f - 1) // 2
        return self.concat_width

    @property
    def embedding_params(self) -> int:
        return sum(t.rows * t.dim for t in self.tables)

    @property
    def dense_params(self) -> int:
        bottom = _mlp_params(self.dense_features, self.bottom_mlp)
        cross = self.dcn_layers * (2 * self.concat_width * self.dcn_low_rank + self.concat_width)
        return bottom + cross + _mlp_params(self.interaction_width, self.top_mlp)

    @property
    def param_count(self) -> int:
        return self.embedding_params + self.dense_params

    @property
    def active_param_count(self) -> int:
        """Parameters one sample touches: the dense ones and the rows it looks up."""
        return self.dense_params + sum(t.pooling * t.dim for t in self.tables)

    @property
    def lookups_per_sample(self) -> int:
        return sum(t.pooling for t in self.tables)

    @property
    def matrix_flops_per_sample(self) -> float:
        """Multiply-adds of the MLPs, cross layers and dot interaction, 2 FLOPs each."""
        macs = _mlp_macs(self.dense_features, self.bottom_mlp)
        macs += self.dcn_layers * 2 * self.concat_width * self.dcn_low_rank
        if self.interaction == "dot":
            macs += self.features**2 * self.bottom_mlp[-1]  # the full X X^T, as DLRM computes it
        macs += _mlp_macs(self.interaction_width, self.top_mlp)
        return 2.0 * macs


def _mlp_macs(width: int, layers: tuple[int, ...]) -> int:
    return sum(a * b for a, b in pairwise((width, *layers)))


def _mlp_params(width: int, layers: tuple[int, ...]) -> int:
    return _mlp_macs(width, layers) + sum(layers)  # weights and biases


_FIELDS = {"dense_features", "bottom_mlp", "tables", "interaction", "top_mlp", "dcn_layers",
           "dcn_low_rank"}  # fmt: skip
_TABLE_FIELDS = {"rows", "dim", "pooling", "count"}


def config_from_json(data: dict, name: str, origin: str) -> DLRMConfig:
    """Reads a DLRM config dict; a missing, unknown or non-positive field is a UserError."""
    if not isinstance(data, dict):
        raise UserError(f"{origin}: expected a JSON object")
    _reject_unknown(data, _FIELDS, "", origin)
    interaction = data.get("interaction", "dot")
    if interaction not in INTERACTIONS:
        raise UserError(
            f"{origin}: field 'interaction' must be one of {', '.join(INTERACTIONS)}, "
            f"got {interaction!r}"
        )
    dcn = interaction == "dcn"
    bottom = _positive_list(data, "bottom_mlp", origin)
    cfg = DLRMConfig(
        name=name,
        dense_features=_positive(data, "dense_features", origin),
        bottom_mlp=bottom,
        tables=_tables(data, origin),
        interaction=interaction,
        top_mlp=_positive_list(data, "top_mlp", origin),
        dcn_layers=_layers(_positive(data, "dcn_layers", origin), "dcn_layers", origin)
        if dcn else 0,
        dcn_low_rank=_positive(data, "dcn_low_rank", origin) if dcn else 0,
    )
    if interaction == "dot":
        for i, t in enumerate(cfg.tables):
            if t.dim != bottom[-1]:
                raise UserError(
                    f"{origin}: field 'tables[{i}].dim' ({t.dim}) must equal the last "
                    f"'bottom_mlp' width ({bottom[-1]}): dot interaction multiplies them"
                )
    return cfg


def _reject_unknown(data: dict, known: set[str], prefix: str, origin: str) -> None:
    for key in data:
        if key not in known:
            raise UserError(f"{origin}: unknown field '{prefix}{key}'" + closest(key, known))


def _positive(data: dict, key: str, origin: str, where: str = "") -> int:
    if key not in data:
        raise UserError(f"{origin}: missing field '{where}{key}'")
    return config_count(data[key], f"{where}{key}", origin, MAX_SIZE)


MAX_TABLES = 10_000
"""The most embedding tables a model may have: ~400x MLPerf's DLRM-v2 (26). Each table is
its own op and placement, so the count is the cost: 10,000 simulate in 1.2 s on one chip,
2.9 s on 64 (2026-12-01); `count: 10^9` would list 10^9 tables before any other check."""
MAX_SIZE = 2**40
"""The largest count any field may hold (rows, widths, pooling): 10^12, ~25,000x DLRM-v2's
largest table (4e7 rows)."""


MAX_LAYERS = 10_000
"""The most layers an MLP or a cross network may have: each is its own ops, so the count is
the cost, as for tables (DLRM-v2 has 3 cross layers and MLPs of 3 and 5)."""


def _layers(n: int, field: str, origin: str) -> int:
    if n > MAX_LAYERS:
        raise UserError(f"{origin}: field '{field}' has {n:,} layers; at most {MAX_LAYERS:,} "
                        "can be simulated")  # fmt: skip
    return n


def _positive_list(data: dict, key: str, origin: str) -> tuple[int, ...]:
    if key not in data:
        raise UserError(f"{origin}: missing field '{key}'")
    values = data[key]
    if not isinstance(values, list) or not values:
        raise UserError(f"{origin}: field '{key}' must be a non-empty list of layer widths")
    _layers(len(values), key, origin)
    return tuple(config_count(v, f"{key}[{i}]", origin, MAX_SIZE) for i, v in enumerate(values))


def _tables(data: dict, origin: str) -> tuple[TableSpec, ...]:
    if "tables" not in data:
        raise UserError(f"{origin}: missing field 'tables'")
    groups = data["tables"]
    if not isinstance(groups, list) or not groups:
        raise UserError(f"{origin}: field 'tables' must be a non-empty list of tables")
    tables: list[TableSpec] = []
    for i, group in enumerate(groups):
        where = f"tables[{i}]."
        if not isinstance(group, dict):
            raise UserError(f"{origin}: field 'tables[{i}]' must be an object")
        _reject_unknown(group, _TABLE_FIELDS, where, origin)
        spec = TableSpec(*(_positive(group, k, origin, where) for k in ("rows", "dim", "pooling")))
        count = _positive(group, "count", origin, where) if "count" in group else 1
        if len(tables) + count > MAX_TABLES:
            raise UserError(f"{origin}: field '{where}count': more than {MAX_TABLES:,} tables "
                            f"in all; at most that many can be simulated")  # fmt: skip
        tables.extend([spec] * count)
    return tuple(tables)
