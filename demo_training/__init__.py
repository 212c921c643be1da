"""Training and measuring the demo models that ship with the harness (``harness/assets``): the
``harness-train-demo`` command (:mod:`demo_training.train_demo`).

A distribution of its own (``prefix-harness-demo-training``), beside the harness and not part of
it: the harness runs the shipped models, this package made them. It uses the harness only through
its public names (model loading, adapters, prompt and prefix files, the measurement engine).
"""
