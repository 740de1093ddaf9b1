"""How far the static analysis follows a value, in one place.

Each limit bounds a different walk, so they differ; what they share is that a walk which hits
one answers "not known" rather than guessing, and that none lets a hostile file make the
analysis slow.
"""

# python/values.py: names, calls and attributes followed to evaluate an expression (a constant
# through a helper's default through ``args.x``'s argparse default ...)
EVALUATION_DEPTH = 24
# python/dataflow.py: assignments followed back for a dtype or a string (name -> assignment -> ...)
DATAFLOW_STEPS = 4
# python/dataflow.py: a loss travels further (helpers, parameters, products, returns)
LOSS_STEPS = 10
# python/loops.py: helper functions a training loop calls, inlined into its events
LOOP_HELPER_DEPTH = 3
