"""The course's own material as data: the masters' format and metadata (:mod:`.notebooks`)."""
