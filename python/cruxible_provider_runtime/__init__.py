"""cruxible_provider_runtime: the Python side of a cruxprov provider.

Providers import ProviderResult and ProviderRunContext from here (or from
cruxible_provider_runtime.provider_api). The harness module is what the
executor runs: ``python -I -m cruxible_provider_runtime.harness``, with the
protocol channel on fd 1 or, from 0.2.0 on, handed over on a descriptor of
its own (see its docstring).

This package uses the standard library only and supports CPython 3.9+.
"""

from .provider_api import (
    PROTOCOL_VERSION,
    Budgets,
    EgressLog,
    ProviderResult,
    ProviderRunContext,
)

__version__ = "0.2.0"

__all__ = [
    "PROTOCOL_VERSION",
    "Budgets",
    "EgressLog",
    "ProviderResult",
    "ProviderRunContext",
    "__version__",
]
