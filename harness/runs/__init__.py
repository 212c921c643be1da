"""Run orchestration: an experiment made concrete (``experiment``), the one loop from conditions to
table rows (``compute``), a sweep start to finish (``runner``), run directories and their
self-verifying results (``rundir``, ``store``, ``tables``, ``schema``, ``manifest``), which runs may
be read together and how (``compat``, ``reading``), the input files a run was made from (``inputs``), and the commands built on them (``collect``, ``locate``, ``check_determinism``, ``causal_heads``).

Public here (each imported on first use):

- ``experiment``: ``Experiment``
- ``compute``: ``compute``, ``Computed``
- ``runner``: ``run``, ``SweepFailed``
- ``rundir``: ``RunDir``
- ``reading``: ``load_run``, ``load_runs``, ``load_noise``
- ``check_determinism``: ``check``
"""

from harness.exports import lazy_exports

_API = {
    "Experiment": "harness.runs.experiment",
    "compute": "harness.runs.compute",
    "Computed": "harness.runs.compute",
    "run": "harness.runs.runner",
    "SweepFailed": "harness.runs.runner",
    "RunDir": "harness.runs.rundir",
    "load_run": "harness.runs.reading",
    "load_runs": "harness.runs.reading",
    "load_noise": "harness.runs.reading",
    "check": "harness.runs.check_determinism",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
