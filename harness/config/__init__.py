"""The typed configuration of a sweep, registered with Hydra's ConfigStore.

The YAML files under ``harness/conf/`` fill in the dataclasses of :mod:`harness.config.schema`.
Every node is typed, so a key that does not exist there (a typo) is an error at composition time,
and every setting that is a choice is an :class:`~enum.Enum`, so ``prefix.too_short=repat`` is
refused by Hydra with the allowed values. What types cannot say (positive lengths, a non-empty
isolation list, ...) is checked by :func:`validate` (:mod:`harness.config.validation`), which runs
before any model is loaded. Call :func:`register_configs` once before Hydra composes (the CLI does;
:func:`compose` does it for tests and notebooks).

Public here:

- composing and recording: ``compose``, ``override_list`` (a command line's overrides, checked),
  ``register_configs``, ``recorded_config``, ``as_plain``, ``config_keys``, ``config_differences`` (two
  configs' differing keys), ``GROUPS`` (the config groups), ``NOT_RESULT_KEYS`` (settings that change no
  result)
- checking: ``validate``, ``is_validated``
- the schema: ``RunConfig``, ``ModelConfig``, ``ClaimsConfig`` and the choices ``Dtype``, ``Group``,
  ``IsolationMode``, ``OnExisting``, ``Placement``, ``CacheSetting``
"""

from harness.config.composing import compose, override_list
from harness.config.schema import (
    GROUPS,
    NOT_RESULT_KEYS,
    CacheSetting,
    ClaimsConfig,
    Dtype,
    Group,
    IsolationMode,
    ModelConfig,
    OnExisting,
    Placement,
    RunConfig,
    as_plain,
    config_differences,
    config_keys,
    recorded_config,
    register_configs,
)
from harness.config.validation import is_validated, validate

__all__ = ["GROUPS", "NOT_RESULT_KEYS", "CacheSetting", "ClaimsConfig", "Dtype", "Group", "IsolationMode",
           "ModelConfig", "OnExisting", "Placement", "RunConfig", "as_plain", "compose", "config_differences",
           "config_keys", "is_validated", "override_list", "recorded_config", "register_configs", "validate"]
