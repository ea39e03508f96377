"""The world's one error type, apart from the world itself so that the modules the world is made of raise it too."""


class WorldError(RuntimeError):
    """The world could not be started, reached or stopped. The message says what to do."""
