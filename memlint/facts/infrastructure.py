"""The GPU a project's committed infrastructure files request: a slurm batch script's
``#SBATCH --gres=gpu:a100:8``, a SkyPilot task's ``resources: accelerators: A100:8``, a
Kubernetes/Kueue manifest's ``nvidia.com/gpu`` limit with a node selector or affinity naming
the product, a Modal app's ``gpu="H100:8"``, a dstack configuration's ``resources: gpu: A100:80GB:8``
(or only a memory size, ``80GB:8``), Ray's ``num_gpus`` / ``ScalingConfig`` with an
``accelerator_type``, a Ray cluster config's GPU node type (``ray up cluster.yaml``), and a RunPod
pod (``runpod.create_pod(gpu_type_id=...)``, ``runpodctl create pod --gpuType ...``).

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
# dstack's and Ray's bare "A100" matches either card (dstack: a name plus an optional memory,
# `gpu: A100:80GB:8`, dstack/_internal/core/models/resources.py; Ray: ray.util.accelerators has
# NVIDIA_A100 = "A100" beside "A100-40G" and "A100-80G"): the smaller one is the safe verdict.
_PLATFORM_NAMES = {
    "skypilot": {"a100": "a100-40gb"},
    "modal": {"a100": "a100-40gb"},
    "kubernetes": {"nvidia-tesla-a100": "a100-40gb", "tesla-a100": "a100-40gb"},
    "dstack": {"a100": "a100-40gb"},
    "ray": {"a100": "a100-40gb"},
}
# node labels whose value names the GPU product (NVIDIA's GPU feature discovery, GKE, EKS/Karpenter)
_PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                   "karpenter.k8s.aws/instance-gpu-name", "k8s.amazonaws.com/accelerator")
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$", re.MULTILINE)
_MAX_COUNT = 1 << 16
_IMPORTS_MODAL = re.compile(r"^\s*(?:import|from)\s+modal\b", re.MULTILINE)
_IMPORTS_RAY = re.compile(r"^\s*(?:import|from)\s+ray\b", re.MULTILINE)
_IMPORTS_RUNPOD = re.compile(r"^\s*(?:import|from)\s+runpod\b", re.MULTILINE)
# runpodctl create pod(s) --gpuType "NVIDIA A100 80GB PCIe" --gpuCount 2
_RUNPODCTL = re.compile(r"^[^\n#]*\brunpodctl\s+create\s+pods?\b", re.MULTILINE)


@dataclass(frozen=True)
class InfraGpu:
    """A GPU an infrastructure file requests."""

    gpu: Gpu
    count: int | None  # GPUs in the job (per node x nodes) when the file says, else None
    origin: Location
    said: str  # the request as written, for the message
    platform: str  # "slurm", "SkyPilot", "Kubernetes", "Modal", "dstack", "Ray", "RunPod"

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


def slurm_gpus_per_node(text: str) -> int | None:
    """The GPUs per node a batch script requests, typed or not (``#SBATCH --gres=gpu:8``,
    ``--gpus-per-node=h100:8``): what each node of ``sbatch --nodes N script`` brings."""
    found = slurm_environment(text).get("SLURM_GPUS_ON_NODE")
    return int(found[0]) if found is not None else None


# what SLURM sets in a job's environment from the script's ``#SBATCH`` request
_SLURM_NODES = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
_SLURM_GPUS = ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE")
_SLURM_TASKS = ("SLURM_NTASKS_PER_NODE",)


def slurm_environment(text: str) -> dict[str, tuple[str, int, int]]:
    """The variables SLURM sets in the job a batch script's ``#SBATCH`` header requests, as
    ``$SLURM_NNODES`` reads them when the script runs (``--nodes=32`` -> ``SLURM_NNODES=32``,
    ``--gres=gpu:8`` -> ``SLURM_GPUS_ON_NODE=8``): name -> (value, start, end of where the header
    writes it). A node range (``--nodes=2-4``) leaves the count to the scheduler: none."""
    out: dict[str, tuple[str, int, int]] = {}
    if "#SBATCH" not in text:
        return out
    for match in _SBATCH.finditer(text):
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:
            continue
        for name, value in _options(words):
            names: tuple[str, ...] = ()
            count = None
            if name in ("--nodes", "-N"):
                names, count = _SLURM_NODES, _count(value)
            elif name in ("--gres", "--gpus-per-node"):
                spec = next((s for s in value.split(",") if s.startswith("gpu")), None) if name == "--gres" else value
                names, count = _SLURM_GPUS, _typed(spec, "slurm")[1] if spec is not None else None
            elif name == "--ntasks-per-node":
                names, count = _SLURM_TASKS, _count(value)
            if count is None:
                continue
            written = match.group(1)
            at = written.find(value)
            inner = value.rfind(str(count)) if at >= 0 else -1
            start = match.start(1) + at + inner if inner >= 0 else match.start(1)
            end = start + len(str(count)) if inner >= 0 else match.end(1)
            out.update({variable: (str(count), start, end) for variable in names})
    return out


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
        return "{" + ", ".join(f"{k.value}: {_said(v)}" for k, v in node.value) + "}"
    if isinstance(node, yaml.SequenceNode):
        return "[" + ", ".join(_said(v) for v in node.value) + "]"
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


# ----------------------------------------------------------------------------------- dstack

def _smallest_with_memory(gigabytes: float) -> Gpu | None:
    """A dstack spec that names only the memory (``80GB:8``) runs on any card of that size: the
    catalogue's data-centre or desktop card of that label with the least usable memory."""
    from memlint.catalog.gpus import all_gpus

    label = f"{gigabytes:g} GB"
    fitting = [g for g in all_gpus() if not g.unified_memory and g.label.startswith(label)]
    return min(fitting, key=lambda g: g.total_bytes) if fitting else None


def _gigabytes(text: str) -> float | None:
    """``80GB`` / ``24GB..80GB`` / ``40GB..`` -> the smallest size it allows (dstack's units)."""
    low = text.replace(" ", "").lower().split("..")[0]
    for unit, scale in (("tb", 1024.0), ("gb", 1.0), ("mb", 1 / 1024)):
        if low.endswith(unit):
            try:
                return float(low[: -len(unit)]) * scale
            except ValueError:
                return None
    return None


def _dstack_gpu(names: list[str], memory: str | None) -> Gpu | None:
    """The card a dstack GPU spec runs on; of several names, the one with the least memory."""
    size = _gigabytes(memory) if memory else None
    if not names:
        return _smallest_with_memory(size) if size else None
    found = []
    for name in names:
        gpu = _gpu(f"{name}-{size:g}gb", "dstack") if size else None
        found.append(gpu or _gpu(name, "dstack"))
    if any(g is None for g in found):
        return None
    return min((g for g in found if g is not None), key=lambda g: g.total_bytes, default=None)


def _dstack_count(text: str) -> int | None:
    return _count(str(text).replace(" ", "").split("..")[0])


def from_dstack(path: str, text: str) -> InfraGpu | None:
    """A dstack task, service or dev environment: ``resources: {gpu: A100:80GB:8}``, ``gpu: 80GB:8``,
    ``gpu: {name: [H100, A100], memory: 80GB, count: 8}``, with ``nodes: 2``."""
    if "gpu" not in text or "resources" not in text or "type" not in text:
        return None
    for document in _documents(text):
        kind = _get(document, "type")
        if not isinstance(kind, yaml.ScalarNode) or kind.value not in ("task", "service", "dev-environment"):
            continue
        resources = _get(document, "resources")
        spec = _get(resources, "gpu") if resources is not None else None
        if spec is None:
            continue
        names: list[str] = []
        memory: str | None = None
        count: int | None = 1  # dstack's default count
        if isinstance(spec, yaml.ScalarNode):
            for token in spec.value.replace(" ", "").split(":"):
                if not token or token.lower() in ("nvidia", "amd", "tpu", "intel", "tenstorrent"):
                    continue
                if token[0].isalpha():
                    names = token.split(",")
                elif any(c.isalpha() for c in token):
                    memory = token
                else:
                    count = _dstack_count(token)
        elif isinstance(spec, yaml.MappingNode):
            name = _get(spec, "name")
            if isinstance(name, yaml.ScalarNode):
                names = [name.value]
            elif isinstance(name, yaml.SequenceNode):
                names = [n.value for n in name.value if isinstance(n, yaml.ScalarNode)]
            size = _get(spec, "memory")
            memory = size.value if isinstance(size, yaml.ScalarNode) else None
            number = _get(spec, "count")
            count = _dstack_count(number.value) if isinstance(number, yaml.ScalarNode) else 1
        gpu = _dstack_gpu(names, memory)
        if gpu is None:
            continue
        nodes = _get(document, "nodes")
        if count is not None and isinstance(nodes, yaml.ScalarNode):
            count *= _count(nodes.value) or 1
        return InfraGpu(gpu, count, Location(path, _range(spec)), f"gpu: {_said(spec)}", "dstack")
    return None


# ----------------------------------------------------------------------------------- Ray, RunPod

def _ray_accelerator(text: str) -> str:
    """``NVIDIA_TESLA_A100`` / ``NVIDIA_A100_80G`` (ray.util.accelerators) or ``"A100-80G"`` ->
    a name the catalogue reads (``A100``, ``A100-80GB``)."""
    name = re.sub(r"^(?:NVIDIA_|AMD_)?(?:TESLA_|AMPERE_|INSTINCT_|RADEON_)?", "", text.strip())
    name = name.replace("_", "-")
    return re.sub(r"-(\d+)G$", r"-\1GB", name)  # A100-80G -> A100-80GB (A10G stays A10G)


def from_ray_cluster(path: str, text: str) -> InfraGpu | None:
    """A Ray cluster launcher config (``ray up cluster.yaml``): the node type of
    ``available_node_types`` whose ``resources`` give it GPUs (``{"GPU": 8}``) and name the card as
    the ``accelerator_type:<name>`` resource Ray gives such a node (ray.util.accelerators), or a GCP
    node's ``node_config.guestAccelerators`` (``acceleratorType: nvidia-tesla-a100``, named like GKE's).
    The count is the node's GPUs times its ``min_workers`` when it starts some; else the cluster
    says which card, not how many the job uses."""
    if "available_node_types" not in text:
        return None
    for document in _documents(text):
        node_types = _get(document, "available_node_types")
        if not isinstance(node_types, yaml.MappingNode):
            continue
        found = []
        for _, node_type in node_types.value:
            card = _ray_node_gpu(node_type)
            if card is None:
                continue
            gpu, per_node, named, said = card
            workers = _get(node_type, "min_workers")
            started = _count(workers.value) if isinstance(workers, yaml.ScalarNode) else None
            count = per_node * started if per_node and started else None
            found.append(InfraGpu(gpu, count, Location(path, _range(named)), said, "Ray"))
        if found and len({f.gpu.id for f in found}) == 1:  # node types with different cards: no verdict
            return found[0]
    return None


def _ray_node_gpu(node_type: yaml.Node) -> tuple[Gpu, int | None, yaml.Node, str] | None:
    """(card, GPUs per node, the node that names the card, the request as written) of one node type."""
    resources = _get(node_type, "resources")
    gpus = _get(resources, "GPU") if resources is not None else None
    per_node = _count(gpus.value) if isinstance(gpus, yaml.ScalarNode) else None
    if isinstance(resources, yaml.MappingNode):
        for key, _ in resources.value:
            if isinstance(key, yaml.ScalarNode) and str(key.value).startswith("accelerator_type:") and per_node:
                gpu = _gpu(_ray_accelerator(str(key.value).split(":", 1)[1]), "ray")
                if gpu is not None:
                    return gpu, per_node, key, f"{key.value} with GPU: {per_node}"
    node_config = _get(node_type, "node_config")
    guests = _get(node_config, "guestAccelerators") if node_config is not None else None
    if isinstance(guests, yaml.SequenceNode) and len(guests.value) == 1:
        kind = _get(guests.value[0], "acceleratorType")
        number = _get(guests.value[0], "acceleratorCount")
        if isinstance(kind, yaml.ScalarNode):
            # a name or a resource path (projects/<project>/zones/<zone>/acceleratorTypes/nvidia-tesla-k80)
            gpu = _gpu(str(kind.value).rpartition("/")[2], "kubernetes")
            if gpu is not None:
                count = per_node or (_count(number.value) if isinstance(number, yaml.ScalarNode) else None)
                return gpu, count, kind, f"acceleratorType: {kind.value}"
    return None


def _python_requests(path: str, text: str) -> InfraGpu | None:
    """Ray's ``@ray.remote(num_gpus=8, accelerator_type=NVIDIA_A100_80G)``, ``.options(...)`` or
    Ray Train's ``ScalingConfig(num_workers=8, use_gpu=True, accelerator_type="H100")``, and
    RunPod's ``runpod.create_pod(..., gpu_type_id="NVIDIA A100 80GB PCIe", gpu_count=2)``."""
    ray = _IMPORTS_RAY.search(text) is not None and "accelerator_type" in text
    runpod = _IMPORTS_RUNPOD.search(text) is not None and "gpu_type_id" in text
    if not ray and not runpod:
        return None
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    found: list[InfraGpu] = []

    def written(node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
            return node.evaluated_value
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            return node.attr.value
        return None

    def number(node: cst.BaseExpression | None) -> int | None:
        return _count(node.value) if isinstance(node, cst.Integer) else None

    class Visitor(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def visit_Call(self, node: cst.Call) -> None:
            if found:
                return
            keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            where_node: cst.BaseExpression | None = None
            gpu, count, platform = None, None, ""
            if ray and "accelerator_type" in keywords:
                name = written(keywords["accelerator_type"])
                gpu = _gpu(_ray_accelerator(name), "ray") if name else None
                count = number(keywords.get("num_gpus"))
                workers = number(keywords.get("num_workers"))
                if workers is not None:
                    per_worker = 1
                    resources = keywords.get("resources_per_worker")
                    if isinstance(resources, cst.Dict):
                        for element in resources.elements:
                            if isinstance(element, cst.DictElement) and written(element.key) == "GPU":
                                per_worker = number(element.value) or per_worker
                    count = workers * per_worker
                where_node, platform = keywords["accelerator_type"], "Ray"
            elif runpod and "gpu_type_id" in keywords:
                name = written(keywords["gpu_type_id"])
                gpu = _gpu(name, "runpod") if name else None
                count = number(keywords.get("gpu_count")) or 1
                where_node, platform = keywords["gpu_type_id"], "RunPod"
            if gpu is None or where_node is None:
                return
            place = self.get_metadata(PositionProvider, where_node)
            span = Range.of(place.start.line, place.start.column, place.end.line, place.end.column)
            said = cst.Module([]).code_for_node(where_node)
            keyword = "accelerator_type" if platform == "Ray" else "gpu_type_id"
            found.append(InfraGpu(gpu, count, Location(path, span), f"{keyword}={said}", platform))

    try:
        wrapper.visit(Visitor())
    except RecursionError:
        return None
    return found[0] if found else None


def from_runpodctl(path: str, text: str) -> InfraGpu | None:
    """``runpodctl create pod --gpuType "NVIDIA A100 80GB PCIe" --gpuCount 2`` in a shell script."""
    if "runpodctl" not in text:
        return None
    for match in _RUNPODCTL.finditer(text):
        end = text.find("\n", match.end())
        while end >= 0 and text[:end].rstrip().endswith("\\"):  # the command's continued lines
            end = text.find("\n", end + 1)
        command = text[match.start(): len(text) if end < 0 else end]
        try:
            words = shlex.split(command.replace("\\\n", " "), comments=True)
        except ValueError:
            continue
        options = dict(_options(words))
        name = options.get("--gpuType")
        gpu = _gpu(name, "runpod") if name else None
        if gpu is None:
            continue
        line = text.count("\n", 0, match.start()) + 1
        first = command.split("\n", 1)[0]
        return InfraGpu(gpu, _count(options.get("--gpuCount", "1")), Location(path, Range.of(line, 0, line, len(first))),
                        f"--gpuType {shlex.quote(name or '')}", "RunPod")
    return None


def read(path: str, text: str) -> InfraGpu | None:
    """The GPU a file requests, by what the file is (its suffix decides which readers try)."""
    suffix = PurePath(path).suffix.lower()
    try:
        if suffix in (".sh", ".bash", ".slurm", ".sbatch"):
            return from_slurm(path, text) or from_runpodctl(path, text)
        if suffix in (".yaml", ".yml"):
            return (from_skypilot(path, text) or from_kubernetes(path, text) or from_dstack(path, text)
                    or from_ray_cluster(path, text))
        if suffix == ".py":
            return from_modal(path, text) or _python_requests(path, text)
    except (RecursionError, MemoryError, ValueError):
        return None
    return None
