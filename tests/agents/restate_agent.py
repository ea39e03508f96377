"""Run (or resume) one order on Restate: `python restate_agent.py --order ORD-8842`.

Restate pushes: the server invokes the order's handler over HTTP. So this process is the service endpoint
*and* the client: it serves the handler (restate_order.py) on this world's fixed loopback port, registers that
deployment, then sends the order's invocation to its virtual object with the order id as the idempotency key --
which starts it the first time and finds the same invocation every time after -- and attaches to it for the
result (stored, once it is done). Killed, it takes the endpoint with it; Restate keeps retrying the invocation
against the same address, and the next agent process, binding that address again, is where the journal is
replayed; it asks for the retry at once (admin API ``resume``) rather than waiting out the back-off.
"""
import asyncio
import os
import socket
import sys

import httpx
from hypercorn.asyncio import serve
from hypercorn.config import Config

from crashlab.agent import AgentError, agent_main, state_dir
from crashlab.restate_server import RestateUnavailable, endpoint_for, register_deployment, restate_urls

WAIT_S = float(os.environ.get("CRASHLAB_RESTATE_WAIT", "120"))


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def main(order_id: str) -> dict:
    ingress, admin = restate_urls()
    endpoint = endpoint_for(state_dir())
    import restate_order  # here, not at the top: it reads this world's service name from the state dir

    url = f"http://127.0.0.1:{endpoint['port']}"
    stop = asyncio.Event()
    server = None
    if not port_taken(endpoint["port"]):  # else another resumer serves this world's endpoint: be a client only
        config = Config()
        config.bind = [f"127.0.0.1:{endpoint['port']}"]
        config.loglevel = "ERROR"  # not the "no lifespan support" warning of every start
        config.accesslog = None
        config.graceful_timeout = 0.5
        server = asyncio.ensure_future(serve(restate_order.app, config, shutdown_trigger=stop.wait))
        for _ in range(250):
            if server.done() or port_taken(endpoint["port"]):
                break
            await asyncio.sleep(0.02)
        if server.done() and isinstance(server.exception(), OSError):
            server = None  # a resumer started at the same moment bound it first: it serves, we wait
        elif server.done():
            server.result()  # any other failure to serve is an error
        else:
            await asyncio.to_thread(register_deployment, admin, url)
    try:
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            try:
                # Start the order's invocation, or find the one already started (same idempotency key).
                sent = await client.post(f"{ingress}/{restate_order.SERVICE}/{order_id}/run/send", json=order_id,
                                         headers={"idempotency-key": order_id}, timeout=10)
                if sent.status_code not in (200, 202):
                    raise AgentError(f"order {order_id}: Restate refused the invocation: {sent.status_code} "
                                     f"{' '.join(sent.text.split())[:300]}")
                invocation = sent.json()["invocationId"]
                if server is not None and sent.json().get("status") == "PreviouslyAccepted":
                    # A retry waiting out its back-off (the last endpoint process died): retry now, here.
                    # Any other state (running, done) answers with an error, which is fine to ignore.
                    await client.patch(f"{admin}/invocations/{invocation}/resume", timeout=10)
                reply = await client.get(f"{ingress}/restate/invocation/{invocation}/attach")
            except httpx.TimeoutException:
                raise AgentError(f"order {order_id} is still running after {WAIT_S:.0f} s; run this command again "
                                 "to keep working on it") from None
            except httpx.HTTPError as exc:
                raise RestateUnavailable(f"cannot reach the Restate server at {ingress} ({type(exc).__name__})") from None
        if reply.status_code != 200:
            raise AgentError(f"order {order_id} failed on Restate: {reply.status_code} {' '.join(reply.text.split())[:300]}")
        return reply.json()
    finally:
        stop.set()
        if server is not None:
            await asyncio.wait([server], timeout=2)
            if server.done():
                server.exception()  # retrieved: a late bind error of a racing resumer is not worth a warning


def run(order_id: str) -> None:
    code = 0
    try:
        outcome = asyncio.run(main(order_id))
        print(f"[done] {outcome['final']}")
    except AgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    agent_main(run)
