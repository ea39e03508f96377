"""The soak: many orders, random kills, several resumers racing, faults in the world itself -- run until the
ledgers are audited (:mod:`.run`), with the world's side (:mod:`.world`), the results (:mod:`.results`) and the
reference agents it can soak (:mod:`.reference`)."""

from crashlab.soak.run import (CALIBRATION_ORDER, MAX_ORDERS, WORLD_FAULTS, OrderResult, SoakResult, order_ids,
                               parse_resumers, parse_world_faults, soak)

__all__ = ["CALIBRATION_ORDER", "MAX_ORDERS", "OrderResult", "SoakResult", "WORLD_FAULTS", "order_ids", "parse_resumers",
           "parse_world_faults", "soak"]
