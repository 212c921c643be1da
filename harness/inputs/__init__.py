"""What goes into the model, before any model is loaded: prompt and prefix files (``texts``), prefix
banks built from corpora or templates (``prefix_bank``), token-exact assembly of A and X
(``assembly``), placements raw or inside a chat template (``chat``), isolation settings
(``isolation``), what obeying a prefix means (``checks``), and the experiment's cells
(``conditions``).

Public here (each imported on first use):

- ``texts``: ``Prompt``, ``Prefix``, ``load_prompts``, ``load_prefixes``, ``select_prefixes``
- ``prefix_bank``: ``build_bank``, ``check_bank``, ``neutral_bank_from_corpus``,
  ``instruction_bank_from_templates``
- ``assembly``: ``Assembled``, ``encode``, ``cut_prefix``
- ``chat``: ``PLACEMENTS``, ``ChatConfig``, ``ChatLayout``, ``chat_layout``
- ``isolation``: ``MODES``, ``Isolation``, ``isolations``, ``setting_label``
- ``checks``: ``CHECKS``, ``TargetCheck``, ``target_check``
- ``conditions``: ``KEY_FIELDS``, ``Condition``, ``build_conditions``
"""

from harness.exports import lazy_exports

_API = {
    "Prompt": "harness.inputs.texts",
    "Prefix": "harness.inputs.texts",
    "load_prompts": "harness.inputs.texts",
    "load_prefixes": "harness.inputs.texts",
    "select_prefixes": "harness.inputs.texts",
    "build_bank": "harness.inputs.prefix_bank",
    "check_bank": "harness.inputs.prefix_bank",
    "neutral_bank_from_corpus": "harness.inputs.prefix_bank",
    "instruction_bank_from_templates": "harness.inputs.prefix_bank",
    "Assembled": "harness.inputs.assembly",
    "encode": "harness.inputs.assembly",
    "cut_prefix": "harness.inputs.assembly",
    "PLACEMENTS": "harness.inputs.chat",
    "ChatConfig": "harness.inputs.chat",
    "ChatLayout": "harness.inputs.chat",
    "chat_layout": "harness.inputs.chat",
    "MODES": "harness.inputs.isolation",
    "Isolation": "harness.inputs.isolation",
    "isolations": "harness.inputs.isolation",
    "setting_label": "harness.inputs.isolation",
    "CHECKS": "harness.inputs.checks",
    "TargetCheck": "harness.inputs.checks",
    "target_check": "harness.inputs.checks",
    "KEY_FIELDS": "harness.inputs.conditions",
    "Condition": "harness.inputs.conditions",
    "build_conditions": "harness.inputs.conditions",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
