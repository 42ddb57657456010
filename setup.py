"""Packages and the optional C extension (native/_native.c, tensor_texts.c, spans.c); everything else is in setup.cfg.

The packages are found, not listed: msprof_kit and everything below it, plus the top-level folders
parsers/ and collectors/ installed as msprof_kit.parsers and msprof_kit.collectors (with any
subpackage they grow). Without a compiler the build skips the extension and
msprof_kit.native_impl uses its pure-Python twin."""
from setuptools import Extension, find_packages, setup

MAPPED = {"msprof_kit.parsers": "parsers", "msprof_kit.collectors": "collectors"}

packages = find_packages(include=["msprof_kit", "msprof_kit.*"])
for name, folder in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={"msprof_kit": "msprof_kit", **MAPPED},
      ext_modules=[Extension("msprof_kit._native", ["native/_native.c", "native/tensor_texts.c", "native/spans.c"],
                             depends=["native/tensor_texts.h", "native/spans.h"], optional=True)])
