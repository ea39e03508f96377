"""Restate: the server (:mod:`.server`) and what an agent uses to reach it and to host the endpoint it pushes to
(:mod:`.client`)."""

from crashlab.engines.restate.client import (ENV_RESTATE_ADMIN, ENV_RESTATE_INGRESS, RestateUnavailable, admin_sql,
                                             attach, call_handler, endpoint_for, invocation_row, journal_names,
                                             port_taken, register_deployment, resolve_awakeable, restate_urls,
                                             serve_endpoint, stuck_reason)
from crashlab.engines.restate.server import (RESTATE_VERSION, RestateServer, RestateServerError, restate_binary,
                                             restate_environment)

__all__ = ["ENV_RESTATE_ADMIN", "ENV_RESTATE_INGRESS", "RESTATE_VERSION", "RestateServer", "RestateServerError",
           "RestateUnavailable", "admin_sql", "attach", "call_handler", "endpoint_for", "invocation_row",
           "journal_names", "port_taken", "register_deployment", "resolve_awakeable", "restate_binary",
           "restate_environment", "restate_urls", "serve_endpoint", "stuck_reason"]
