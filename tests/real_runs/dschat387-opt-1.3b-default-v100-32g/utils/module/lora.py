# DeepSpeed-Chat training/utils/module/lora.py (April 2023), reduced.
import math

import torch
import torch.nn.functional as F
from torch import nn


class LinearLayer_LoRA(nn.Module):
    def __init__(self, weight, lora_dim=0, lora_scaling=1, lora_droppout=0, bias=None):
        super().__init__()
        self.weight = weight
        self.bias = bias
        rows, columns = weight.shape
        self.lora_right_weight = nn.Parameter(torch.zeros(columns, lora_dim))
        self.lora_left_weight = nn.Parameter(torch.zeros(lora_dim, rows))
        self.lora_scaling = lora_scaling / lora_dim
        self.lora_dropout = nn.Dropout(lora_droppout) if lora_droppout > 0 else nn.Identity()
        nn.init.kaiming_uniform_(self.lora_right_weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_left_weight)
        # the wrapped linear weight is frozen; everything outside the wrapped linears stays trainable
        # unless only_optimize_lora_parameters() is called
        self.weight.requires_grad = False

    def forward(self, input):
        return F.linear(input, self.weight, self.bias) + (
            self.lora_dropout(input) @ self.lora_right_weight @ self.lora_left_weight
        ) * self.lora_scaling


def convert_linear_layer_to_lora(model, part_module_name, lora_dim=0, lora_scaling=1, lora_droppout=0):
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and part_module_name in n]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        module = getattr(parent, child)
        setattr(parent, child, LinearLayer_LoRA(module.weight, lora_dim, lora_scaling, lora_droppout, module.bias)
                .to(module.weight.device).to(module.weight.dtype))
    return model


def only_optimize_lora_parameters(model):
    for name, param in model.named_parameters():
        param.requires_grad = "lora_right_weight" in name or "lora_left_weight" in name
    return model
