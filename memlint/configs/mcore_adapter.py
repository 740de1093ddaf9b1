"""The keys LLaMA-Factory's Megatron backend reads from a training YAML.

With ``USE_MCA=1`` LLaMA-Factory parses its config with mcore_adapter's ``TrainingArguments``
(``hparams/parser.py``: ``_parse_train_mca_args``), which adds Megatron's parallel, recompute,
fusion, MoE and distributed-optimizer settings to Transformers' fields. mcore_adapter is not on
PyPI (it ships inside alibaba/ROLL and imports Megatron-Core at import time), so its schema cannot
be generated here: the field names below are those of its ``DistributingParallelArguments`` and
``MegatronArguments`` dataclasses as read in alibaba/ROLL,
``mcore_adapter/src/mcore_adapter/training_args.py`` at 59f45298f768. LLaMA-Factory's
``examples/megatron/*.yaml`` (0.9.4) write them; later releases declare the ones they pass on in
their own ``megatron_bridge_args.py``, which memlint reads as the project's fields.
"""

from __future__ import annotations

from typing import Any, Mapping

MCORE_ADAPTER_FIELDS = frozenset({
    # DistributingParallelArguments
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "sequence_parallel",
    "virtual_pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout", "overlap_p2p_comm", "variable_seq_lengths", "recompute_granularity",
    "recompute_method", "recompute_modules", "recompute_num_layers", "bias_activation_fusion",
    "apply_rope_fusion", "moe_layer_recompute", "moe_token_dispatcher_type", "moe_aux_loss_coeff",
    "moe_grouped_gemm", "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
    "moe_token_drop_policy", "moe_shared_expert_overlap", "moe_router_dtype", "mtp_num_layers",
    "calculate_per_token_loss", "transformer_impl", "fp8_recipe", "fp8_param", "fp8", "additional_configs",
    # MegatronArguments
    "accumulate_allreduce_grads_in_fp32", "use_distributed_optimizer", "distrib_optim_fully_reshardable",
    "distrib_optim_fully_reshardable_mem_efficient", "overlap_grad_reduce", "delay_grad_reduce",
    "overlap_param_gather", "check_for_nan_in_loss_and_grad", "ddp_average_in_collective", "ddp_bucket_size",
    "optimizer", "optimizer_cpu_offload", "optimizer_offload_fraction", "save_hf_model", "save_merged_model",
    "sequence_packing",
})

# a config that sets one of these is run with USE_MCA=1: only mcore_adapter's arguments read them
_MEGATRON_SWITCHES = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size")


def megatron_fields(config: Mapping[str, Any]) -> frozenset[str]:
    """mcore_adapter's fields, for a LLaMA-Factory config written for its Megatron backend
    (it sets a Megatron parallel size); none for any other."""
    return MCORE_ADAPTER_FIELDS if any(key in config for key in _MEGATRON_SWITCHES) else frozenset()
