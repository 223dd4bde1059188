"""The trajfs Python package: an extension over the library that
`./configure && make` builds (libtrajfs_pic.a), found in the checkout
this folder lies in, or in TRAJFS_BUILD_DIR (make sets it) with the
sources in TRAJFS_SOURCE_DIR.

    pip install --no-build-isolation ./python     # after make, offline
"""
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("TRAJFS_BUILD_DIR", os.path.join(HERE, "..")))
SRC = os.path.join(os.environ.get("TRAJFS_SOURCE_DIR", os.path.join(HERE, "..")), "src")
LIBRARY = os.path.join(BUILD, "libtrajfs_pic.a")
CONFIG = os.path.join(BUILD, "config.h")

if not os.path.exists(LIBRARY) or not os.path.exists(CONFIG):
    raise SystemExit(
        f"trajfs: {LIBRARY} is not built. Build the project first, with Python's "
        "headers installed (apt-get install python3-dev): autoreconf -fi && ./configure && make")

extension = Extension(
    "trajfs._trajfs",
    sources=["trajfs/_trajfs.c"],
    include_dirs=[SRC],
    extra_compile_args=["-std=c11", "-include", CONFIG, "-Wall", "-Wextra"],
    extra_objects=[LIBRARY],
    libraries=["zstd", "xxhash", "m", "pthread", "dl"],
    depends=[LIBRARY, CONFIG],
)

setup(
    name="trajfs",
    version="0.1.0",
    description="Read and write trajfs archives of training checkpoints without a mount",
    packages=["trajfs"],
    ext_modules=[extension],
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={"torch": ["torch"], "fsspec": ["fsspec"]},
    entry_points={"fsspec.specs": ["trajfs = trajfs.spec:TrajfsFileSystem"]},
)
