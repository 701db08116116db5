"""Build script: the C++ extension torch_tpu._C is built by CMake against the installed torch.

Build without isolation so the installed torch is used (an isolated build would download another torch):
    pip install --no-build-isolation -e .
"""
import os
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # An installed torch_tpu (an earlier editable install) would be autoloaded by `import torch`, before this
        # build has produced its extension.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch
        import torch.utils.cpp_extension as ce

        out_path = os.path.abspath(self.get_ext_fullpath(ext.name))
        out_dir = os.path.dirname(out_path)
        src = os.path.dirname(os.path.abspath(__file__))
        build_dir = os.environ.get("TORCH_TPU_BUILD_DIR", os.path.join(src, "build"))
        os.makedirs(build_dir, exist_ok=True)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        cfg = [
            "cmake", "-S", src, "-B", build_dir, "-G", "Ninja",
            f"-DTORCH_INCLUDE_DIRS={';'.join(ce.include_paths())}",
            f"-DTORCH_LIBRARY_DIR={ce.library_paths()[0]}",
            f"-DPYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
            f"-DTPU_EXT_SUFFIX={suffix}",
            f"-DTPU_OUTPUT_DIR={out_dir}",
            f"-DTORCH_CXX11_ABI={abi}",
            f"-DTPU_BUILD_TESTS={os.environ.get('TORCH_TPU_BUILD_TESTS', 'ON')}",
            f"-DTPU_USE_PCH={os.environ.get('TORCH_TPU_USE_PCH', 'ON')}",
        ]
        subprocess.check_call(cfg)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs])


setup(
    ext_modules=[CMakeExtension("torch_tpu._C")],
    cmdclass={"build_ext": CMakeBuild},
)
