"""The ``crashlab world start``, ``world stop`` and ``audit`` commands: a world for agents run by hand, and what it
saw for an order. Kept apart from :mod:`crashlab.cli.main`, which builds the parser and runs the harness's
commands."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from crashlab.cli import args as check


def start_world(args) -> int:
    if args.port:
        check.check_port_free(args.port)
    from crashlab.world import World, WorldError

    try:
        world = World.start(args.state, fresh=not args.keep, port=args.port, stop_with_parent=not args.detach,
                            key_lease=args.key_lease, key_lifetime=args.key_lifetime)
    except WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"world running at {world.url} (pid {world.pid}), ledgers in {world.ledger_dir}")
    print("agents need these variables:")
    for key, value in world.env().items():
        if key.startswith("CRASHLAB_"):
            print(f"  export {key}={value}")
    if args.detach:
        print(f"stop it with: crashlab world stop --state {args.state}")
        return 0
    print("press Ctrl-C to stop")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        while world.running():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        world.stop()
    return 0


def stop_world(args) -> int:
    from crashlab.world import World, WorldError

    try:
        World.attach(args.state).stop()
    except WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("world stopped")
    return 0


def audit_order(args) -> int:
    from crashlab.world import LedgerError
    from crashlab.world.backlog_audit import audit_of

    try:
        result = audit_of(Path(args.state) / "ledgers", args.order, seen=True)  # a backlog's id: every order's
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.as_dict(), indent=2) if args.json else result)
    return 0


__all__ = ["audit_order", "start_world", "stop_world"]
