"""Build of the C extension cbmm._fused (everything else is in pyproject.toml).

-O3 and the flags below let GCC vectorise the per-entry exp/log1p
polynomials; on x86-64 the source also carries an AVX2/FMA copy of the
kernels, chosen when the module is imported.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "cbmm._fused",
            sources=["src/cbmm/_fused.c"],
            depends=["src/cbmm/_fused_kernels.h", "src/cbmm/_fused_mm_rows.h",
                     "src/cbmm/_buffer.h"],
            extra_compile_args=["-O3", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
                                "-ffp-contract=fast", "-std=c11", "-pthread"],
            extra_link_args=["-pthread"],
        ),
        Extension(
            "cbmm._ingest",
            sources=["src/cbmm/_ingest.c"],
            depends=["src/cbmm/_buffer.h"],
            extra_compile_args=["-O3", "-std=c11"],
        ),
    ]
)
