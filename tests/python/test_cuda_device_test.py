"""Tests of the device's type are decided for CUDA, where memlint judges a run (nanoVLM picks its
autocast dtype with ``bfloat16 if device.type in ["cuda", "cpu"] else float16``)."""

from __future__ import annotations

import libcst as cst
import pytest

from memlint.python.dataflow import on_a_cuda_device


@pytest.mark.parametrize(
    "test,on_cuda",
    [
        ('device.type in ["cuda", "cpu"]', True),
        ('device.type == "mps"', False),
        ('"cuda" in device', True),  # a device string such as "cuda:0"
        ('args.device != "cuda"', False),
        ('self.device.type not in ("cpu", "mps")', True),
        ('"cuda" == device_type', True),
        ('torch.cuda.is_available() and device.type == "cuda"', True),
        ("not torch.cuda.is_available()", False),
        ('device.type == "cuda" or use_amp', True),
        ('device.type == "cuda" and use_amp', None),  # the flag decides
        ("torch.cuda.is_bf16_supported()", None),  # which GPU decides
        ('precision == "cuda"', None),  # not a device's name
    ],
)
def test_a_device_test_on_cuda(test: str, on_cuda: bool | None):
    assert on_a_cuda_device(cst.parse_expression(test)) is on_cuda
