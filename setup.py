"""Build of the optional C extension; everything else is in pyproject.toml.

`courtly.core._speedups` is the compiled SimHash (src/courtly/core/_speedups.c,
bit-identical to the pure-Python path in courtly/core/fingerprint.py) and the
HTML helpers of the extraction worker (_speedups_html.c: maintext's class/id
scan, links' anchor scan). It hashes with the upstream xxHash header
(`xxhash.h`, Debian's libxxhash-dev; header only, nothing is linked).

It is optional: without a C compiler, the Python headers or `xxhash.h` the
build says so in one line and the install goes on, and the pure-Python paths
are used. The compiler takes the usual CFLAGS and LDFLAGS (.ci/sanitize
builds with ASan and UBSan that way).
"""

import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

XXHASH_MISSING = (
    "courtly: the C extension courtly.core._speedups is skipped: no C compiler, or no xxhash.h "
    "(Debian: apt-get install gcc libxxhash-dev); the pure-Python paths are used"
)


class BuildExt(build_ext):
    """build_ext that first checks the compiler finds `xxhash.h`: without it
    the extension is skipped with one clear line instead of a compiler error."""

    def build_extensions(self) -> None:
        if not self._finds_xxhash():
            print(XXHASH_MISSING, file=sys.stderr)
            return
        super().build_extensions()

    def _finds_xxhash(self) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "probe.c")
            with open(probe, "w") as f:
                f.write("#define XXH_INLINE_ALL\n#include <xxhash.h>\nint main(void) { return (int)XXH64(\"\", 0, 0); }\n")
            try:
                self.compiler.compile([probe], output_dir=tmp, include_dirs=self.include_dirs)
            except Exception:  # CompileError, or no compiler at all: the extension is optional
                return False
        return True


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "courtly.core._speedups",
            sources=["src/courtly/core/_speedups.c", "src/courtly/core/_speedups_html.c"],
            depends=["src/courtly/core/_speedups.h"],
            optional=True,
        )
    ],
)
