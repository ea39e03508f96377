"""The world's one error type, apart from the world itself so that the modules the world is made of raise it too."""

from crashlab.errors import CrashlabError


class WorldError(CrashlabError, RuntimeError):
    """The world could not be started, reached or stopped. The message says what to do."""
