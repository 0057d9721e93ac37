"""The one exception type for user mistakes: the CLI prints its message, never a traceback."""


class CrosstuneError(Exception):
    """A problem the user can fix (bad input, missing file, impossible request)."""
