"""A fixture agent that hangs.

It passes through the crash point ``before:model#1`` (so a harness asking for that point kills it
there) and then sleeps far longer than any test timeout, as an agent stuck on a lock or a dead
socket would. Asked for any other crash point, it hangs before reaching it.
"""

import time

from crashlab import failpoints

if __name__ == "__main__":
    failpoints.reach("before", "model#1")
    time.sleep(300)
