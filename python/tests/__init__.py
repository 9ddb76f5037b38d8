"""Unit tests of cruxible_provider_runtime (stdlib unittest)."""
