"""The course's own material as data: the masters' format (:mod:`.notebooks`) and their typed metadata
(:mod:`.metadata`)."""
