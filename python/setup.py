"""pip install ./python: builds trident._C against an installed Trident (or a build tree), found by pkg-config
(PKG_CONFIG_PATH=/opt/trident/lib/pkgconfig, or =build for a build tree), or by TRIDENT_PREFIX (include/ and lib/
under it). The bindings of tensor.h, ops.h, autograd.h, device.h and nn.h are generated from those installed headers by
gen_ops.py. One stable-ABI (abi3) extension serves Python 3.11 and later."""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def trident_flags():
    prefix = os.environ.get("TRIDENT_PREFIX")
    if prefix:
        return [os.path.join(prefix, "include")], [os.path.join(prefix, "lib")]
    try:
        out = subprocess.run(["pkg-config", "--cflags", "--libs", "trident"], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("trident: the Trident library was not found: set PKG_CONFIG_PATH to the directory of trident.pc "
                 f"(an install's lib/pkgconfig, or a build tree), or TRIDENT_PREFIX ({e})")
    words = shlex.split(out)
    return [w[2:] for w in words if w.startswith("-I")], [w[2:] for w in words if w.startswith("-L")]


def trident_version():
    """The C library's version: pkg-config's, else the Version line of TRIDENT_PREFIX's trident.pc."""
    prefix = os.environ.get("TRIDENT_PREFIX")
    if prefix:
        pc = os.path.join(prefix, "lib", "pkgconfig", "trident.pc")
        lines = open(pc).read().splitlines() if os.path.exists(pc) else []
        return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Version:")), "0.0.0")
    return subprocess.run(["pkg-config", "--modversion", "trident"], check=True, capture_output=True,
                          text=True).stdout.strip()


INCLUDES, LIBDIRS = trident_flags()
VERSION = trident_version()


class BuildExt(build_ext):
    """Generates gen_ops.h from the installed headers before compiling."""

    def run(self):
        inc = next((d for d in INCLUDES if os.path.exists(os.path.join(d, "trident", "ops.h"))), None)
        if inc is None:
            sys.exit(f"trident: trident/ops.h is not under the include directories {INCLUDES}")
        out = os.path.join(self.build_temp, "gen")
        os.makedirs(out, exist_ok=True)
        headers = [os.path.join(inc, "trident", h) for h in ("tensor.h", "ops.h", "autograd.h", "device.h", "nn.h")]
        subprocess.run([sys.executable, os.path.join(HERE, "gen_ops.py"), os.path.join(out, "gen_ops.h")] + headers,
                       check=True)
        for ext in self.extensions:
            ext.include_dirs.append(out)
        super().run()


setup(
    name="trident",
    version=VERSION,
    description="Trident tensors, ops and kernels in Python, zero-copy with PyTorch through DLPack",
    packages=["trident", "trident.nn", "trident.optim"],
    python_requires=">=3.11",
    ext_modules=[Extension("trident._C", [os.path.join("src", "_C.c")], include_dirs=INCLUDES, library_dirs=LIBDIRS,
                           runtime_library_dirs=LIBDIRS, libraries=["trident"], py_limited_api=True,
                           define_macros=[("Py_LIMITED_API", "0x030B0000"), ("TRIDENT_VERSION", f'"{VERSION}"')])],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
