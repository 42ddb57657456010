"""msprof-kit: parse and export Ascend msprof profiling collections without CANN."""
__version__ = "0.1.0"
