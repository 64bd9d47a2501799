"""The convolution oracle of the CPU and GPU conv2d tests (and tools/sanitize_cases.py), and
an array known only through DLPack."""
from __future__ import annotations

import numpy as np


def direct(x, w, bias, stride, pad, dilation, groups):
    """The definition, in float64 / complex128: out[n, k, p, q] = bias[k] + sum over c, r, s
    of x_padded[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw] * w[k, c, r, s], g = k // Kg."""
    wide = np.complex128 if np.iscomplexobj(x) else np.float64
    x, w = x.astype(wide), w.astype(wide)
    top, bottom, left, right = pad
    xp = np.zeros(x.shape[:2] + (x.shape[2] + top + bottom, x.shape[3] + left + right), wide)
    xp[:, :, top:top + x.shape[2], left:left + x.shape[3]] = x
    n, c = x.shape[:2]
    k, cg, r, s = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    p = (xp.shape[2] - dh * (r - 1) - 1) // sh + 1
    q = (xp.shape[3] - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((n, k, p, q), wide)
    kg = k // groups
    for kk in range(k):
        g = kk // kg
        for ri in range(r):
            for si in range(s):
                patch = xp[:, g * cg:(g + 1) * cg, ri * dh:ri * dh + sh * (p - 1) + 1:sh,
                           si * dw:si * dw + sw * (q - 1) + 1:sw]
                out[:, kk] += np.einsum("ncpq,c->npq", patch, w[kk, :, ri, si])
        if bias is not None:
            out[:, kk] += bias[kk]
    return out


class DlpackOnly:
    """An array known only through the DLPack protocol (as a JAX or other library's)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()
