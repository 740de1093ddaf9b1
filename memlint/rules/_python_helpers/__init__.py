"""Reading training code from its libcst tree, shared by the training-code rules.

* :mod:`.syntax` — small questions about nodes: a call's method name and receiver, keyword
  arguments, dotted names, what encloses a node.
* :mod:`.dataflow` — which values a name can hold in a function (assignments, conditional
  expressions, dtype spellings), followed a few steps, never executed.
* :mod:`.training` — what a call *does* in a training script: a ``backward()``, an optimizer
  step, a ``zero_grad``, a scaler, an autocast region, an optimizer or model constructor.
* :mod:`.loops` — training loops as ordered events (calls), with the ``if`` guards around each
  and the local helper functions they call inlined.
"""

from memlint.rules._python_helpers.index import ModuleIndex, index_for

__all__ = ["ModuleIndex", "index_for"]
