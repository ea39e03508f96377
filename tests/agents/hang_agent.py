"""A fixture agent that hangs.

It makes its first model call (so a harness that armed ``before:model#1`` sees the world kill it
there) and then sleeps far longer than any test timeout, as an agent stuck on a lock or a dead
socket would. Asked for any other crash point, it hangs before reaching it.
"""

import time

from crashlab.agent import MAX_TOKENS, MODEL, TOOLS, model_client, order_task

if __name__ == "__main__":
    model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                   messages=[{"role": "user", "content": order_task()}])
    time.sleep(300)
