"""Build of the optional C extension; everything else is in pyproject.toml.

`courtly.core._speedups` is the compiled SimHash (src/courtly/core/_speedups.c,
bit-identical to the pure-Python path in courtly/core/fingerprint.py) and the
HTML helpers of the extraction worker (_speedups_html.c: maintext's class/id
scan, links' anchor scan). It is optional: without a C compiler or the
Python headers the build says so and the install goes on, and the
pure-Python paths are used.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "courtly.core._speedups",
            sources=["src/courtly/core/_speedups.c", "src/courtly/core/_speedups_html.c"],
            depends=["src/courtly/core/_speedups.h", "src/courtly/core/_xxh64.h"],
            optional=True,
        )
    ]
)
