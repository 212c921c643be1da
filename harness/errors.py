"""The one exception type for mistakes a user can fix (bad input, missing model, bad lengths).

The CLI prints its message as a single line and exits non-zero; any other exception is a bug and
keeps its traceback.
"""


class HarnessError(Exception):
    """A user-fixable problem. The message says what is wrong, where, and what to do."""
