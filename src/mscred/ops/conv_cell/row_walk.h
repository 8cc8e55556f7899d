// The rows of the bordered index walked a fixed number at a time, each row's output pixel found without a division:
// the backward kernel's staging (conv_cell_bwd.cu) decodes a thread's first row once and steps from it, 8 rows at a
// time, and both kernels' tile loops (conv_cell.cu's too) step from tile to tile (BorderedStep), so that no division
// is left in them. Host code too, so that CI runs this very code against the row decoding by division
// (tests/test_conv_cell_layout.py compiles a small program around it).
#pragma once

#if defined(__CUDACC__)
#define MSCRED_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MSCRED_HOST_DEVICE inline
#endif

namespace mscred_conv_cell {

// A fixed number of rows of the bordered index written in its mixed radix, (images, map rows, columns) with
// rows < H + 1 and columns < W + 1: a walk steps by it with two compares and no division
// (BorderedRowWalk::advance(const BorderedStep&)). Found once per kernel, for the stride between a thread's tiles.
struct BorderedStep {
  int b, y, x;
};

MSCRED_HOST_DEVICE BorderedStep bordered_step(int rows, int height, int width) {
  const int hpwp = (height + 1) * (width + 1), wp = width + 1;
  const int b = rows / hpwp, rem = rows - b * hpwp, y = rem / wp;
  return BorderedStep{b, y, rem - y * wp};
}

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
  // `rows` rows on: the inner loop runs at most once where rows < W + 1 (the staging's 8 rows at level 1), more on
  // small maps.
  MSCRED_HOST_DEVICE void advance(int rows) {
    x += rows;
    while (x > W) {
      x -= W + 1;
      if (++y == H + 1) y = 0, ++b;
    }
  }
  // step.b * (H + 1) (W + 1) + step.y * (W + 1) + step.x rows on, whatever its size: each digit's sum is at most
  // twice its radix less one (x, step.x <= W; y, step.y <= H, plus the carry), so one subtraction each.
  MSCRED_HOST_DEVICE void advance(const BorderedStep& step) {
    x += step.x;
    const int carry_x = x > W ? 1 : 0;
    x -= carry_x * (W + 1);
    y += step.y + carry_x;
    const int carry_y = y > H ? 1 : 0;
    y -= carry_y * (H + 1);
    b += step.b + carry_y;
  }
};

}  // namespace mscred_conv_cell
