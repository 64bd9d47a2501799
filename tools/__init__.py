"""Developer tools of the skcontract checkout, each run as ``python -m tools.<name>`` from the
repository root. The library imports none of them, and the wheel does not ship them.

* :mod:`.calibrate` - fit the cost model's constants to a GEMM benchmark JSON
* :mod:`.cost_report` - auto's choices for the benchmark corpus, as a markdown table
* :mod:`.compile_check` - NVRTC compile of every kernel spec with no GPU (CI)
* :mod:`.sass` - a kernel spec's machine code and the instruction counts of its inner loops
* :mod:`.sanitize_cases` - small GEMMs per fixup protocol for compute-sanitizer (GPU)
* :mod:`.ncu_cases` - one launch per case inside a profiler range, for Nsight Compute (GPU)
* :mod:`.time_layouts` - gemm per operand layout against cuBLAS (GPU)
* :mod:`.time_gemm` - gemm's device time on given shapes, for A/B runs of two trees (GPU)
* :mod:`.warm_kernels` - compile kernel specs into the kernel cache ahead of a run (GPU)

``bash tools/device_run.sh [smoke|tests|sanitize|bench|quick|subset|half|ab]...`` runs the GPU steps
in one device session.
"""
