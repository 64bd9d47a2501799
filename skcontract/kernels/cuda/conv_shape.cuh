// conv_shape.cuh: the convolution geometry the implicit-GEMM entries take by value after the
// GEMM arguments (sk_conv.cuh for the portable families, sk_wgmma_conv.cuh for Wgmma).
#pragma once

namespace skc {

// The convolution's geometry, passed by value after the GEMM arguments; the host packs it
// with the same layout (skcontract/kernels/conv.py, CONV_SHAPE_FIELDS).
struct ConvShape {
  long long stride_n, stride_h, stride_w;  // input strides in elements (channels: 1)
  int H, W, P, Q, R, S, Cg;                // input and output sizes, filter taps, group channels
  int stride_y, stride_x, pad_y, pad_x, dil_y, dil_x;
  // Channels of a pixel that hold data (a folded convolution's S taps, FoldedTaps in
  // skcontract/kernels/conv.py): the loads read whole channel blocks, and the Wgmma
  // consumers zero each block's elements past it in shared memory; 0: every channel.
  int extent;
  // Groups merged into one of the groups the kernel runs (merged_groups.cuh): its k-tiles
  // hold `merged` groups' channels against zero filters off each group's; 1: none merged.
  int merged;
};

}  // namespace skc
