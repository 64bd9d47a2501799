"""CPU kernels of our own: C sources compiled at first use by the host's C compiler
(:mod:`.cc`), for the CPU routes NumPy and BLAS run far from memory speed.

* :mod:`.cc` - find the compiler, build a source for this machine, keep it in the kernel
  cache, load it with ctypes (None where it cannot: the route's NumPy form runs)
* :mod:`.parallel` - units of work split over the CPU's threads, a buffer each
* :mod:`.call` - a convolution kernel's arguments and its run over the threads
* :mod:`.depthwise` - the depthwise convolution (planes, lanes and channels-last forms)
* :mod:`.grouped` - the grouped convolution
"""
