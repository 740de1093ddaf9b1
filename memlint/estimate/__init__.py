"""memlint's one estimator: pure functions from an architecture and a setup to a Budget.

``memlint estimate``, hovers and every rule call this API; nothing here does I/O.
"""

from memlint.estimate.advice import Suggestion, suggest
from memlint.estimate.architecture import Architecture, UnsupportedArchitecture
from memlint.estimate.budget import Budget, Capacity, Component, Phase
from memlint.estimate.capacity import DEFAULT_HEADROOM, DEFAULT_RESERVED_BYTES, capacity_for
from memlint.estimate.config_json import SUPPORTED_MODEL_TYPES, as_sequence_classifier, from_config
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.serving import ServingSetup, ServingSheet, estimate_serving, kv_bytes_per_sequence
from memlint.estimate.setup import Attention, Lora, ModelParallel, Projection, Sharding, TrainingSetup
from memlint.estimate.states import routed_expert_params
from memlint.estimate.training import estimate_training

__all__ = [
    "Architecture",
    "Attention",
    "Budget",
    "Capacity",
    "Component",
    "DEFAULT_HEADROOM",
    "DEFAULT_RESERVED_BYTES",
    "Lora",
    "Optimizer",
    "Phase",
    "ModelParallel",
    "Projection",
    "Precision",
    "SUPPORTED_MODEL_TYPES",
    "ServingSetup",
    "ServingSheet",
    "Sharding",
    "Suggestion",
    "TrainingSetup",
    "UnsupportedArchitecture",
    "as_sequence_classifier",
    "capacity_for",
    "estimate_serving",
    "estimate_training",
    "from_config",
    "kv_bytes_per_sequence",
    "routed_expert_params",
    "suggest",
]
