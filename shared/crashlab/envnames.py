"""The environment variables through which the world, the harness and the grader tell an agent process where
things are. They live apart from the world so that an agent process, which reads them, never imports the world."""

ENV_MODEL_URL = "CRASHLAB_MODEL_URL"        # the world's Messages API
ENV_SERVICES_URL = "CRASHLAB_SERVICES_URL"  # the world's payments, inventory and email services
ENV_STATE_DIR = "CRASHLAB_STATE_DIR"        # the folder where an agent keeps its durable state
ENV_PRIVATE_DIR = "CRASHLAB_PRIVATE_DIR"    # set by the grader: where worlds keep ledgers only trusted code reads

__all__ = ["ENV_MODEL_URL", "ENV_PRIVATE_DIR", "ENV_SERVICES_URL", "ENV_STATE_DIR"]
