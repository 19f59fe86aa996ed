"""What a MODEL name means, for every command: the zoo, a local path, the Hugging Face
cache, then the hub.

In that order, the first that has it wins:

1. the zoo, by id or by the hub repo its file was copied from (any case), so a bundled
   name never touches the disk or the network; a repo whose architecture has no reader
   yet (zoo.unbuilt_repos) is refused here, by its model_type;
2. a local path: a config.json (or xpusim's own config files, an ONNX or torch.export
   file), or a folder holding config.json, as engines take a snapshot folder. Only a name
   that looks like a path (`./llama`, `/models/x`, `x.json`) or exists on disk is one, so a
   file in the working folder named like a zoo model does not shadow the zoo;
3. the local Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else
   ~/.cache/huggingface/hub): models--org--name/snapshots/<commit>/config.json at the commit
   refs/main names (or refs/<rev> for `org/name@rev`);
4. the hub, through huggingface_hub when installed (the `hub` extra) and not offline
   (HF_HUB_OFFLINE, or the commands' --offline): config.json and hf_quant_config.json only,
   never weights.

A quantized repo's format (workloads/checkpoint.py) is read beside its config and rides on
the config as `checkpoint`. A name none of them has is one UserError naming what was tried,
and the zoo's repos of the same model first (_near: `-Instruct` of a base it has).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from xpusim.errors import UserError
from xpusim.files import is_file, read_json
from xpusim.offline import offline
from xpusim.workloads.checkpoint import read_checkpoint, with_checkpoint
from xpusim.workloads.zoo import (
    config_from_data,
    hub_names,
    hub_repos,
    model_ids,
    unbuilt_repos,
    zoo_entry,
    zoo_file,
)

_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")
"""A hub repo id, `org/name`, with an optional `@revision`."""


@dataclass(frozen=True)
class Resolved:
    """A model as resolved: the workload, where it came from and from what."""

    workload: Any
    origin: str  # "zoo", "file", "cache" or "hub"
    where: str  # the zoo id, the path, the snapshot folder or the hub repo


def cache_dir() -> Path:
    """The hub cache huggingface_hub itself would use."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):  # the older name, still honoured upstream
        return Path(os.environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(home).expanduser() / "hub"


def load_model(
    name: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None
) -> Any:
    """The workload a name resolves to (see the module's docstring)."""
    return resolve(name, input_shapes).workload


def resolve(
    name: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None, *,
    paths: bool = True,
) -> Resolved:  # fmt: skip
    """Resolves a name; `paths=False` (the web API) skips the local file system but the
    hub cache."""
    text = str(name)
    if input_shapes and not text.endswith(".onnx"):
        raise UserError("--input-shape applies to ONNX models (.onnx files) only")
    zoo_id = text if text in model_ids() else hub_names().get(text.lower())
    if zoo_id is not None:
        return Resolved(zoo_entry(zoo_id).config, "zoo", zoo_id)
    if text.lower() in unbuilt_repos():
        raise UserError(f"{text}: {unbuilt_repos()[text.lower()]}")
    near = _near(text)
    tried = ["not in the zoo" + (f" (did you mean {', '.join(near)}?)" if near else "")]
    if paths:
        if _looks_like_path(text) or _exists(text):
            return Resolved(_from_path(Path(text).expanduser(), input_shapes), "file", text)
        tried.append("no such file or folder")
    repo, _, revision = text.partition("@")
    if not _REPO.match(text):
        raise UserError(f"unknown model {text!r}: " + "; ".join(tried))
    snapshot = _snapshot(repo, revision or "main")
    if snapshot is not None:
        cached = _repo_of(snapshot.parent.parent)  # as the cache spells it
        return Resolved(_from_folder(snapshot / "config.json", cached), "cache", str(snapshot))
    tried.append(f"not in the Hugging Face cache {cache_dir()}")
    if offline():
        tried.append("hub not asked (offline: --offline or HF_HUB_OFFLINE)")
    else:
        found, why = _from_hub(repo, revision or None)
        if found is not None:
            return Resolved(found, "hub", text)
        tried.append(f"hub: {why}")
    raise UserError(f"unknown model {text!r}: " + "; ".join(tried))


_SUFFIXES = re.compile(r"(-(instruct|it|chat|hf|base|thinking|fp8|dynamic|awq|gptq|int4|int8"
                       r"|w4a16|w8a8|nvfp4|fp4|\d{4}|v\d+(\.\d+)?))+$", re.IGNORECASE)
"""A release's suffixes after its model's name: fine-tunes (-Instruct, -it, -chat-hf,
-Thinking-2507), versions (-v0.1) and checkpoint formats (-FP8-dynamic, -AWQ)."""


def _release_of(repo: str) -> str:
    """The model a repo releases: its name without org, Meta's old `Meta-` prefix or
    _SUFFIXES (`RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8` -> `llama-3.1-8b`)."""
    return _SUFFIXES.sub("", repo.rpartition("/")[2].lower().removeprefix("meta-"))


def _near(text: str) -> list[str]:
    """The names to suggest for one the zoo lacks: first the hub repos that release the
    same model (a fine-tune or format the zoo has no config of, whose base it may have;
    the alias is not made here, as its architecture is not known equal), then the closest
    spellings."""
    release = _release_of(text)
    same = sorted((r for r in hub_repos() if _release_of(r) == release), key=len)[:3]
    close = difflib.get_close_matches(text, [*model_ids(), *hub_repos()], n=3, cutoff=0.6)
    return list(dict.fromkeys([*same, *close]))[:3]


def _looks_like_path(text: str) -> bool:
    return (text.startswith((".", "/", "~")) or text.endswith(("/", ".json", ".onnx", ".pt2"))
            or (os.sep in text and not _REPO.match(text)))  # fmt: skip


def _exists(text: str) -> bool:
    """Whether a typed name is on disk; a name no file system takes is not, rather than
    an OSError."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def _from_path(path: Path, input_shapes: dict[str, tuple[int, ...]] | None) -> Any:
    """A file (config, .onnx, .pt2) or a snapshot folder holding config.json."""
    if path.suffix == ".onnx":
        from xpusim.workloads.onnx_import import load_onnx

        return load_onnx(path, input_shapes)
    if path.suffix == ".pt2":
        from xpusim.workloads.torch_import import load_exported

        return load_exported(path)
    if _is_dir(path):
        if not (path / "config.json").is_file():
            raise UserError(f"{path}: a folder without config.json (a model folder holds "
                            "the config.json of its Hugging Face snapshot)")  # fmt: skip
        return _from_folder(path / "config.json")
    if not is_file(path):  # a device or pipe is read, and refused with its true error
        raise UserError(f"{path}: no such file or folder")
    return _from_folder(path)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _from_folder(config: Path, name: str | None = None) -> Any:
    """A config file, with the hf_quant_config.json beside it if there is one (a snapshot
    folder's); a transformer is named `name` (its repo id) if given, else as
    zoo.config_from_data names it (`_name_or_path`, else its folder)."""
    data = read_json(config, "config")
    quant = config.with_name("hf_quant_config.json")
    hf_quant = read_json(quant, "config") if config.name == "config.json" and quant.is_file() \
        else None
    workload = config_from_data(data, str(config), config, name=name)
    return _with_checkpoint(workload, data, hf_quant, str(config))


def _with_checkpoint(workload: Any, data: Any, hf_quant: Any, origin: str) -> Any:
    """The workload with its checkpoint format, when it is a transformer and has one."""
    if not isinstance(data, dict) or not hasattr(workload, "checkpoint"):
        return workload
    if hf_quant is not None and not isinstance(hf_quant, dict):
        raise UserError(f"{origin}: hf_quant_config.json is not a JSON object")
    found = read_checkpoint(data, hf_quant, origin)
    return with_checkpoint(workload, found) if found else workload


def _snapshot(repo: str, revision: str) -> Path | None:
    """The cached snapshot folder of `repo` at `revision` (a branch or tag under refs/,
    or a commit) holding config.json, else None. Repo ids match in any case, as the hub's
    do."""
    root = cache_dir()
    folder = root / f"models--{repo.replace('/', '--')}"
    if not _is_dir(folder):
        wanted = folder.name.lower()
        folder = next((f for f in _listing(root) if f.name.lower() == wanted), folder)
    ref = folder / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    snapshot = folder / "snapshots" / commit
    return snapshot if (snapshot / "config.json").is_file() else None


def _listing(root: Path) -> Iterator[Path]:
    try:
        yield from (p for p in root.iterdir() if p.name.startswith("models--"))
    except OSError:
        return


def _repo_of(folder: Path) -> str:
    """models--org--name -> org/name."""
    return folder.name.removeprefix("models--").replace("--", "/", 1)


def cached_models() -> list[tuple[str, Path]]:
    """(repo id, snapshot folder) of every cached repo whose main snapshot has a
    config.json: what `xpusim models` lists beside the zoo."""
    found = []
    for folder in sorted(_listing(cache_dir())):
        repo = _repo_of(folder)
        snapshot = _snapshot(repo, "main")
        if snapshot is not None:
            found.append((repo, snapshot))
    return found


def _from_hub(repo: str, revision: str | None) -> tuple[Any, str]:
    """(the workload, "") from the hub's config.json and hf_quant_config.json, or (None,
    why not) in a few words. The client's own retry messages are silenced: the failure is
    said once, in the error's line."""
    try:
        import huggingface_hub  # imports its logging, configured
    except ImportError:
        return None, "huggingface_hub is not installed (pip install 'xpusim[hub]')"
    try:
        from huggingface_hub import constants  # its ENDPOINT: HF_ENDPOINT's, or the hub's
        endpoint = constants.ENDPOINT
    except (ImportError, AttributeError):  # a client without it: left to the client
        endpoint = ""
    if not _resolves(endpoint):
        return None, _WHY["LocalEntryNotFoundError"]
    hf_hub_download = huggingface_hub.hf_hub_download
    quiet = logging.getLogger("huggingface_hub")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # setLevel, not .level: it clears the loggers' caches
    try:
        config = hf_hub_download(repo, "config.json", revision=revision)
        with contextlib.suppress(Exception):  # most repos have none; modelopt's lands beside
            hf_hub_download(repo, "hf_quant_config.json", revision=revision)
    except Exception as error:  # not found, gated, no network: each is said, none is ours
        return None, _why(error)
    finally:
        quiet.setLevel(level)
    return _from_folder(Path(config), repo), ""


def _resolves(endpoint: str) -> bool:
    """Whether the hub's host has an address. huggingface_hub retries a request that cannot
    connect five times with back-off (1 + 2 + 4 + 8 + 8 s: 23 s measured with no DNS here,
    huggingface_hub 2.4), so where the name resolves nowhere that is said at once; an
    endpoint the client does not state is left to the client."""
    url = urlparse(endpoint)
    if not url.hostname:
        return True
    try:
        socket.getaddrinfo(url.hostname, url.port or (80 if url.scheme == "http" else 443))
    except OSError:
        return False
    return True


_WHY = {"GatedRepoError": "gated (log in with `hf auth login` and accept its terms)",
        "RepositoryNotFoundError": "no such repo (or a private one)",
        "RevisionNotFoundError": "no such revision",
        "EntryNotFoundError": "the repo has no config.json",
        "LocalEntryNotFoundError": "cannot be reached (no network?)",
        "OfflineModeIsEnabled": "offline (HF_HUB_OFFLINE)"}  # fmt: skip
"""huggingface_hub's errors, by class name (subclasses first: a gated repo's error is a
RepositoryNotFoundError too), as a few words."""


def _why(error: Exception) -> str:
    for kind in type(error).__mro__:
        if kind.__name__ in _WHY:
            return _WHY[kind.__name__]
    first = str(error).strip().splitlines()
    return type(error).__name__ + (f" ({first[0][:120]})" if first else "")


@dataclass(frozen=True)
class Listed:
    """A model `xpusim models` lists: its name, where it comes from, and what it builds to
    (None, with `error` saying why, for a bundled architecture this tree cannot build yet)."""

    id: str
    origin: str  # "zoo" or "cache"
    hf_repo: str | None
    config: Any
    error: str = ""
    published_params: float | None = None
    published_active: float | None = None
    params_source: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        c = self.config
        checkpoint = getattr(c, "checkpoint", None)
        return {"id": self.id, "origin": self.origin, "hf_repo": self.hf_repo,
                "params": getattr(c, "param_count", None),
                "active_params": getattr(c, "active_param_count", None),
                "published_params": self.published_params,
                "published_active": self.published_active,
                "checkpoint": checkpoint.to_dict() if checkpoint else None,
                "params_source": self.params_source, "source": self.source,
                **({"error": self.error} if self.error else {})}  # fmt: skip


def listed_models() -> list[Listed]:
    """The zoo, then the cache's repos that are not in it (a cached repo of a model_type
    xpusim does not read is listed with its error, not left out)."""
    found = []
    for model_id in model_ids():
        meta = zoo_file(model_id)[0]
        try:
            config, error = zoo_entry(model_id).config, ""
        except UserError as e:
            config, error = None, str(e)
        found.append(Listed(model_id, "zoo", meta.get("hf_repo"), config, error,
                            meta.get("published_params"), meta.get("published_active"),
                            meta["params_source"], meta["source"]))  # fmt: skip
    for repo, snapshot in cached_models():
        if repo.lower() in hub_names():
            continue
        try:
            config, error = _from_folder(snapshot / "config.json", repo), ""
        except UserError as e:
            config, error = None, str(e)
        found.append(Listed(repo, "cache", repo, config, error, source=str(snapshot)))
    return found
