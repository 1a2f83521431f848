"""triforge: astra, maestro and cpagent on one shared agent core."""

__version__ = "0.1.0"


def _wire() -> None:
    # The embedded local model plugs into core's provider seam from here, loaded only when a run needs it.
    from triforge.core.providers import register

    register("local", "triforge.local.llm")


_wire()
