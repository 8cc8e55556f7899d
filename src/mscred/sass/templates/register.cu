// A register-varying kernel: eight values live in eight registers, and a[0] stores the one VALUE names
// (v0 .. v7), or 0, which the compiler stores from the zero register RZ (255). The store instruction then differs
// between variants only in its source-register field, which is how `mscred sass probe --template register`
// finds that field without a disassembler.
#ifndef VALUE
#define VALUE v3
#endif

__global__ void test(int *a, const int *b) {
    int v0 = b[0], v1 = b[1], v2 = b[2], v3 = b[3], v4 = b[4], v5 = b[5], v6 = b[6], v7 = b[7];
    a[1] = v0; a[2] = v1; a[3] = v2; a[4] = v3; a[5] = v4; a[6] = v5; a[7] = v6; a[8] = v7;
    a[0] = VALUE;
}
