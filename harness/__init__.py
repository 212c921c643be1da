"""Prompt-prefix contamination harness: how much an unrelated prefix changes a model's output,
and where inside the model the change happens."""

__version__ = "0.1.0"
