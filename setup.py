"""Build of the optional C extension; everything else is in pyproject.toml.

`courtly.core._speedups` is the compiled SimHash (src/courtly/core/_speedups.c,
bit-identical to the pure-Python path in courtly/core/fingerprint.py). It is
optional: without a C compiler or the Python headers the build says so and
the install goes on, and the pure-Python path is used.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "courtly.core._speedups",
            sources=["src/courtly/core/_speedups.c"],
            optional=True,
        )
    ]
)
