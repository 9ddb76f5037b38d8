"""cruxible_provider_runtime: the Python side of a cruxprov provider.

Providers import ProviderResult and ProviderRunContext from here (or from
cruxible_provider_runtime.provider_api). The harness module is what the
executor runs (as ``python -I -S -c BOOTSTRAP``: see its docstring).

This package uses the standard library only and supports CPython 3.9+.
"""

from .provider_api import (
    PROTOCOL_VERSION,
    Budgets,
    EgressLog,
    ProviderResult,
    ProviderRunContext,
)

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION",
    "Budgets",
    "EgressLog",
    "ProviderResult",
    "ProviderRunContext",
    "__version__",
]
