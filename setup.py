"""The optional C extension (native/_native.c); everything else is in setup.cfg.

Without a compiler the build skips it and msprof_kit.native_impl uses its pure-Python twin."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("msprof_kit._native", ["native/_native.c"], optional=True)])
