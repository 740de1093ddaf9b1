"""What a project's own trainer class says about the models it runs, read from its code.

Preference projects copy TRL's ``DPOTrainer`` into their own ``Trainer`` subclass (SPPO's
``SPPOTrainer``, SPIN's ``SPINTrainer``, both from TRL 0.9.x's ``trl/trainer/dpo_trainer.py``):

* ``concatenated_forward`` runs a pair's chosen and rejected sequences as one batch;
* ``__init__`` builds the reference model itself when none is passed, as TRL's does::

      if ref_model:
          self.ref_model = ref_model
      elif self.is_peft_model or precompute_ref_log_probs:
          self.ref_model = None          # the adapter disabled stands in for it
      else:
          self.ref_model = create_reference_model(model)   # a deep copy of the policy

  (TRL 0.9.6, ``DPOTrainer.__init__``; ``create_reference_model`` is ``deepcopy(model)`` with
  every parameter frozen, ``trl/models/modeling_base.py``). A ``ref_model`` passed as a string is
  loaded with ``from_pretrained`` instead: another model of its own either way.
"""

from __future__ import annotations

import libcst as cst

# what builds a model of its own: TRL's copy of the policy, ``copy.deepcopy``, a checkpoint load
_BUILDERS = ("create_reference_model", "deepcopy")


def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _callee(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _builds_model(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = _callee(value)
    return name in _BUILDERS or name == "from_pretrained"


class _ReferenceAssignments(cst.CSTVisitor):
    """``self.ref_model = <a model built here>`` anywhere in a method's body."""

    def __init__(self) -> None:
        self.found: cst.Assign | None = None

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.found is not None:
            return
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" \
                    and t.attr.value == "ref_model" and _builds_model(node.value):
                self.found = node


def reference_built(cls: cst.ClassDef) -> cst.Assign | None:
    """The statement of ``cls.__init__`` that builds the trainer's own reference model, when the
    class takes a ``ref_model`` and makes one itself (TRL's ``DPOTrainer`` copied): None for a
    trainer that only keeps the reference it is given, or takes none."""
    init = method(cls, "__init__")
    if init is None:
        return None
    parameters = [p.name.value for p in (*init.params.posonly_params, *init.params.params, *init.params.kwonly_params)]
    if "ref_model" not in parameters:
        return None
    visitor = _ReferenceAssignments()
    init.body.visit(visitor)
    return visitor.found
