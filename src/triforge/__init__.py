"""triforge: astra, maestro and cpagent on one shared agent core."""

__version__ = "0.1.0"


def _wire() -> None:
    # The embedded local model plugs into core's provider seam, and cpagent offers CP-Bench to maestro as an
    # entry point, from here: by module path, loaded only when a run needs it.
    from triforge.core import entry_points, providers

    providers.register("local", "triforge.local.llm")
    entry_points.register("cpbench", "triforge.cpagent.api")


_wire()
