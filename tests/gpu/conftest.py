"""GPU tests: skipped unless CuPy imports and sees a CUDA device."""
import pytest


def _gpu_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


GPU = _gpu_available()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not GPU:
                item.add_marker(pytest.mark.skip(reason="needs CuPy and an NVIDIA GPU"))
