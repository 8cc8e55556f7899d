// The articles' kernel: the constant VALUE becomes the immediate operand of one instruction
// (MOV32I on sm_5x, MOV / HFMA2.MMA on sm_7x+). `mscred sass probe` compiles it with -DVALUE=<n> for several n.
#ifndef VALUE
#define VALUE 0xcc
#endif

__global__ void test(int *a) {
    a[0] = VALUE;
}
