"""CPU kernels of our own: C sources compiled at first use by the host's C compiler
(:mod:`.cc`), for the CPU routes NumPy and BLAS run far from memory speed.

* :mod:`.cc` - find the compiler, build a source for this machine, keep it in the kernel
  cache, load it with ctypes (None where it cannot: the route's NumPy form runs)
* :mod:`.depthwise` - the depthwise convolution, its planes spread over the CPU's threads
"""
