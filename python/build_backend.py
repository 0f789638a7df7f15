"""The wheel's build backend: scikit-build-core's, with TRIDENT_CMAKE_ARGS (Trident's CMake options, e.g.
"-DTRIDENT_CUDA=OFF -DCMAKE_C_COMPILER_LAUNCHER=ccache") added to CMAKE_ARGS, which scikit-build-core reads."""
import os

from scikit_build_core.build import *  # noqa: F401,F403

_extra = os.environ.get("TRIDENT_CMAKE_ARGS", "").strip()
if _extra:
    os.environ["CMAKE_ARGS"] = (os.environ.get("CMAKE_ARGS", "") + " " + _extra).strip()
