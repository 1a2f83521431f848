"""triforge: astra, maestro and cpagent on one shared agent core."""

__version__ = "0.1.0"
