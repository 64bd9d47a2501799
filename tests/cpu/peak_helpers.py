"""What the peak tests share: the working set tracemalloc measures over one call."""
import tracemalloc


def warm_peak(expr, ops):
    """``expr(*ops)`` and the peak tracemalloc measures on a second call (the first
    compiles: the traced call holds only its working set)."""
    got = expr(*ops)
    tracemalloc.start()
    try:
        expr(*ops)
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
