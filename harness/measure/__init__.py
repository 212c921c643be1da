"""Measurement: the metric registry (``metrics``, ``output_metrics``, ``attention_metrics``), X's
choices and output KL along A's continuation (``continuation_steps``), one
prompt's conditions through the model (``engine``), the loop over prompts and batches
(``driver``), a condition's table row (``records``), and the run's own numerical noise
(``noise``).

Public here (each imported on first use):

- ``metrics``: ``METRICS``
- ``engine``: ``Engine``, ``Reference``, ``Result``
- ``driver``: ``drive``, ``plan_batches``
- ``records``: ``condition_record``, ``condition_keys``, ``condition_label``
- ``noise``: ``measure_noise_floor``, ``flag_near_ties``
"""

from harness.exports import lazy_exports

_API = {
    "METRICS": "harness.measure.metrics",
    "Engine": "harness.measure.engine",
    "Reference": "harness.measure.engine",
    "Result": "harness.measure.engine",
    "drive": "harness.measure.driver",
    "plan_batches": "harness.measure.driver",
    "condition_record": "harness.measure.records",
    "condition_keys": "harness.measure.records",
    "condition_label": "harness.measure.records",
    "measure_noise_floor": "harness.measure.noise",
    "flag_near_ties": "harness.measure.noise",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
