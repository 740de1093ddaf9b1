"""The GPU a project's committed infrastructure files request: a slurm batch script's
``#SBATCH --gres=gpu:a100:8``, a SkyPilot task's ``resources: accelerators: A100:8``, a
Kubernetes/Kueue manifest's ``nvidia.com/gpu`` limit with a node selector or affinity naming
the product, a Modal app's ``gpu="H100:8"``.

People rarely write the target GPU into a linter's settings, but they commit the file that asks
the scheduler for it; without a GPU every out-of-memory verdict is silent. Each reader returns
the GPU as the catalogue names it, the count it asks for, and where it says so, so that the
memory finding can name the file. Nothing is executed: YAML is composed safely, Python is read
with libcst.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath

import yaml

from memlint.catalog.gpus import Gpu, UnknownGpu, lookup_gpu
from memlint.model.diagnostics import Range
from memlint.model.provenance import Location

# Names a platform gives a card that the catalogue's aliases would read as another. SkyPilot's and
# Modal's bare "A100" is the 40 GB card (SkyPilot lists A100-80GB apart, `sky show-gpus`; Modal:
# 'gpu="A100" attaches 1 A100-40GB', modal.com/docs/reference/modal.gpu); GKE's
# "nvidia-tesla-a100" is the 40 GB card and "nvidia-a100-80gb" the 80 GB one
# (cloud.google.com/kubernetes-engine/docs/how-to/gpus).
_PLATFORM_NAMES = {
    "skypilot": {"a100": "a100-40gb"},
    "modal": {"a100": "a100-40gb"},
    "kubernetes": {"nvidia-tesla-a100": "a100-40gb", "tesla-a100": "a100-40gb"},
}
# node labels whose value names the GPU product (NVIDIA's GPU feature discovery, GKE, EKS/Karpenter)
_PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                   "karpenter.k8s.aws/instance-gpu-name", "k8s.amazonaws.com/accelerator")
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$", re.MULTILINE)
_MAX_COUNT = 1 << 16
_IMPORTS_MODAL = re.compile(r"^\s*(?:import|from)\s+modal\b", re.MULTILINE)


@dataclass(frozen=True)
class InfraGpu:
    """A GPU an infrastructure file requests."""

    gpu: Gpu
    count: int | None  # GPUs in the job (per node x nodes) when the file says, else None
    origin: Location
    said: str  # the request as written, for the message
    platform: str  # "slurm", "SkyPilot", "Kubernetes", "Modal"

    def describe(self, root: str | None = None) -> str:
        """```#SBATCH --gres=gpu:a100:8` in jobs/train.slurm:5`` (relative to ``root``)."""
        path = self.origin.path
        if root is not None:
            try:
                path = str(PurePath(path).relative_to(root))
            except ValueError:
                pass
        return f"`{self.said}` in {path}:{self.origin.range.start.line}"


def _gpu(name: str, platform: str) -> Gpu | None:
    key = name.strip().lower().rstrip("!+")
    key = _PLATFORM_NAMES.get(platform, {}).get(key, key)
    for candidate in (key, re.sub(r"^(nvidia[-_ ]?)?(tesla[-_ ]?)?", "", key)):
        try:
            return lookup_gpu(candidate)
        except UnknownGpu:
            continue
    return None


def _count(text: object) -> int | None:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if 0 < value < _MAX_COUNT else None


def _typed(spec: str, platform: str) -> tuple[Gpu | None, int | None]:
    """``A100:8`` / ``gpu:a100:8`` / ``h100`` / ``8`` -> (GPU, count)."""
    parts = [p for p in spec.strip().split(":") if p]
    if parts and parts[0].lower() == "gpu":
        parts = parts[1:]
    count = _count(parts[-1]) if parts else None
    if count is not None:
        parts = parts[:-1]
    gpu = _gpu(parts[0], platform) if parts else None
    return gpu, count


# ----------------------------------------------------------------------------------- slurm

def from_slurm(path: str, text: str) -> InfraGpu | None:
    """``#SBATCH --gres=gpu:a100:8`` / ``--gpus-per-node=h100:8`` / ``--gpus=16`` with
    ``--constraint=a100`` and ``--nodes=2``."""
    if "#SBATCH" not in text:
        return None
    gpu, per_node, total, nodes, where, said = None, None, None, 1, None, ""
    for match in _SBATCH.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:
            continue
        options = _options(words)
        for name, value in options:
            found = None
            if name == "--gres":
                spec = next((s for s in value.split(",") if s.startswith("gpu")), None)
                if spec is not None:
                    found, count = _typed(spec, "slurm")
                    per_node = count or per_node
            elif name in ("--gpus-per-node",):
                found, count = _typed(value, "slurm")
                per_node = count or per_node
            elif name in ("--gpus", "-G"):
                found, count = _typed(value, "slurm")
                total = count or total
            elif name in ("--constraint", "-C") and gpu is None:
                found = next((g for g in map(lambda w: _gpu(w, "slurm"), re.split(r"[|&,\[\]*]", value)) if g), None)
            elif name in ("--nodes", "-N"):
                nodes = _count(value.split("-")[0]) or nodes
            if found is not None and (gpu is None or name not in ("--constraint", "-C")):
                gpu, where = found, Range.of(line, 0, line, len(match.group(0)))
                said = match.group(0).split(" #")[0].strip()
    if gpu is None or where is None:
        return None
    count = total or (per_node * nodes if per_node else None)
    return InfraGpu(gpu, count, Location(path, where), said, "slurm")


def _options(words: list[str]) -> list[tuple[str, str]]:
    out = []
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            out.append((name, value))
        elif word.startswith("-") and index + 1 < len(words):
            out.append((word, words[index + 1]))
            index += 1
        index += 1
    return out


# ----------------------------------------------------------------------------------- YAML

def _range(node: yaml.Node) -> Range:
    start, end = node.start_mark, node.end_mark
    return Range.of(start.line + 1, start.column, end.line + 1, end.column)


def _get(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


def _documents(text: str) -> list[yaml.Node]:
    try:
        return [d for d in yaml.compose_all(text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError:
        return []
    except RecursionError:
        return []


def from_skypilot(path: str, text: str) -> InfraGpu | None:
    """A SkyPilot task: ``resources: {accelerators: A100:8}`` (or ``{H100: 8}``) and ``num_nodes``."""
    if "accelerators" not in text:
        return None
    for document in _documents(text):
        resources = _get(document, "resources")
        accelerators = _get(resources, "accelerators") if resources is not None else None
        if accelerators is None or not any(_get(document, k) is not None for k in ("run", "setup", "num_nodes", "name")):
            continue
        gpu, count = None, None
        if isinstance(accelerators, yaml.ScalarNode):
            gpu, count = _typed(accelerators.value, "skypilot")
            count = count or 1
        elif isinstance(accelerators, yaml.MappingNode) and len(accelerators.value) == 1:
            (k, v), = accelerators.value
            gpu, count = _gpu(str(k.value), "skypilot"), _count(getattr(v, "value", None))
        if gpu is None:
            continue  # a list of candidates: which one runs is SkyPilot's choice
        nodes = _get(document, "num_nodes")
        if count is not None and isinstance(nodes, yaml.ScalarNode):
            count *= _count(nodes.value) or 1
        said = f"accelerators: {_said(accelerators)}"
        return InfraGpu(gpu, count, Location(path, _range(accelerators)), said, "SkyPilot")
    return None


def _said(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return "{" + ", ".join(f"{k.value}: {getattr(v, 'value', '')}" for k, v in node.value) + "}"
    return "…"


def from_kubernetes(path: str, text: str) -> InfraGpu | None:
    """A manifest (Job, PyTorchJob, JobSet, Kueue workload...) asking for ``nvidia.com/gpu``
    whose node selector, affinity or labels name the product (``nvidia.com/gpu.product:
    NVIDIA-H100-80GB-HBM3``, ``cloud.google.com/gke-accelerator: nvidia-h100-80gb``)."""
    if "nvidia.com/gpu" not in text:
        return None
    for document in _documents(text):
        if _get(document, "kind") is None or _get(document, "apiVersion") is None:
            continue
        product: tuple[Gpu, yaml.Node] | None = None
        count = None
        for mapping in _mappings(document):
            for key, value in ((k.value, v) for k, v in mapping.value if isinstance(k, yaml.ScalarNode)):
                names: list[yaml.Node] = []
                if key in _PRODUCT_LABELS and isinstance(value, yaml.ScalarNode):
                    names = [value]  # a nodeSelector or a label
                elif key == "key" and isinstance(value, yaml.ScalarNode) and value.value in _PRODUCT_LABELS:
                    chosen = _get(mapping, "values")  # an affinity's matchExpressions
                    if isinstance(chosen, yaml.SequenceNode):
                        names = [v for v in chosen.value if isinstance(v, yaml.ScalarNode)]
                elif key == "nvidia.com/gpu" and isinstance(value, yaml.ScalarNode) and count is None:
                    count = _count(value.value)
                gpus = [(g, n) for g, n in ((_gpu(n.value, "kubernetes"), n) for n in names) if g is not None]
                if product is None and gpus and len({g.id for g, _ in gpus}) == 1:
                    product = gpus[0]
        if product is not None and count is not None:
            gpu, node = product
            return InfraGpu(gpu, count, Location(path, _range(node)), f"{node.value} x{count}", "Kubernetes")
    return None


def _mappings(node: yaml.Node, depth: int = 0):
    """Every mapping node under ``node``, depth first (bounded)."""
    if depth > 40:
        return
    if isinstance(node, yaml.MappingNode):
        yield node
        for _, v in node.value:
            yield from _mappings(v, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _mappings(item, depth + 1)


# ----------------------------------------------------------------------------------- Modal

def from_modal(path: str, text: str) -> InfraGpu | None:
    """``@app.function(gpu="H100:8")``, ``gpu=modal.gpu.A100(count=2, size="80GB")``."""
    if "gpu" not in text or not _IMPORTS_MODAL.search(text):
        return None
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    found: list[InfraGpu] = []

    class Visitor(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def visit_Arg(self, node: cst.Arg) -> None:
            if found or node.keyword is None or node.keyword.value != "gpu":
                return
            gpu, count, said = _modal_value(node.value)
            if gpu is None:
                return
            where = self.get_metadata(PositionProvider, node)
            span = Range.of(where.start.line, where.start.column, where.end.line, where.end.column)
            found.append(InfraGpu(gpu, count, Location(path, span), f"gpu={said}", "Modal"))

    try:
        wrapper.visit(Visitor())
    except RecursionError:
        return None
    return found[0] if found else None


def _modal_value(node) -> tuple[Gpu | None, int | None, str]:
    import libcst as cst

    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str):
            gpu, count = _typed(value, "modal")
            return gpu, count or 1, node.value
    if isinstance(node, cst.Call):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        dotted = cst.Module([]).code_for_node(func)
        if not ("gpu." in dotted or dotted == name) or not isinstance(name, str):
            return None, None, ""
        count, size = 1, ""
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "count" and isinstance(arg.value, cst.Integer):
                count = _count(arg.value.value) or 1
            if keyword in ("size", "memory") and isinstance(arg.value, (cst.SimpleString, cst.Integer)):
                raw = arg.value.evaluated_value if isinstance(arg.value, cst.SimpleString) else arg.value.value
                size = str(raw).upper().removesuffix("GB")
        gpu = _gpu(f"{name}-{size}GB" if size else name, "modal")
        return gpu, count, cst.Module([]).code_for_node(node)
    return None, None, ""


def read(path: str, text: str) -> InfraGpu | None:
    """The GPU a file requests, by what the file is (its suffix decides which readers try)."""
    suffix = PurePath(path).suffix.lower()
    try:
        if suffix in (".sh", ".bash", ".slurm", ".sbatch"):
            return from_slurm(path, text)
        if suffix in (".yaml", ".yml"):
            return from_skypilot(path, text) or from_kubernetes(path, text)
        if suffix == ".py":
            return from_modal(path, text)
    except (RecursionError, MemoryError, ValueError):
        return None
    return None
