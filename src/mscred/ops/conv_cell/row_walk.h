// The rows of the bordered index walked a fixed number at a time, each row's output pixel found without a division:
// the backward kernel's staging (conv_cell_bwd.cu, MSCRED_CONV_CELL_BWD_ROW_STEPS=1) decodes a thread's first row of
// a tile once and steps from it. Host code too, so that CI runs this very code against the row decoding by division
// (tests/test_conv_cell_layout.py compiles a small program around it).
#pragma once

#if defined(__CUDACC__)
#define MSCRED_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MSCRED_HOST_DEVICE inline
#endif

namespace mscred_conv_cell {

// Row q of the (B, H + 1, W + 1) bordered maps (the border: the last row and column), as (b, y, x); b = -1 for the
// rows before the first tile's first row (q >= -(W + 2)), b >= B past the last.
struct BorderedRowWalk {
  int b, y, x;
  int B, H, W;

  MSCRED_HOST_DEVICE BorderedRowWalk(int q, int batch, int height, int width) : B(batch), H(height), W(width) {
    // decoded one image ahead (q + Hp Wp >= 0 for every row a tile stages), unsigned: the shorter division sequence
    const unsigned hpwp = static_cast<unsigned>((H + 1) * (W + 1)), wp = static_cast<unsigned>(W + 1);
    const unsigned ahead = static_cast<unsigned>(q + static_cast<int>(hpwp));
    const unsigned image = ahead / hpwp, rem = ahead - image * hpwp;
    b = static_cast<int>(image) - 1;
    y = static_cast<int>(rem / wp);
    x = static_cast<int>(rem) - y * static_cast<int>(wp);
  }
  // Whether the row is an output pixel (not a border row, not before the first image or past the last).
  MSCRED_HOST_DEVICE bool inside() const { return b >= 0 && b < B && y < H && x < W; }
  // Its output pixel, b * H * W + y * W + x (meaningful where inside()).
  MSCRED_HOST_DEVICE int pixel() const { return (b * H + y) * W + x; }
  // `rows` rows on: the inner loop runs once where rows < W + 1 (level 1: 8 rows; 32 is one more than W + 1 = 31,
  // twice at most), more on small maps.
  MSCRED_HOST_DEVICE void advance(int rows) {
    x += rows;
    while (x > W) {
      x -= W + 1;
      if (++y == H + 1) y = 0, ++b;
    }
  }
};

}  // namespace mscred_conv_cell
