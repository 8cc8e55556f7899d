// The first article's test program, unchanged but for VALUE: one thread writes a constant, the host prints it.
// Build: nvcc -arch=sm_90 -o test article_test.cu ; run: ./test  ->  *a = cc
#include <stdio.h>

#ifndef VALUE
#define VALUE 0xcc
#endif

__global__ void test(int *a) {
    a[0] = VALUE;
}

int main(int argc, const char* argv[]) {
    cudaError_t err;
    int *a;
    cudaMallocManaged(&a, sizeof(int));
    *a = 0x01;
    test<<<1, 1>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess)
        fprintf(stderr, "launch: %s\n", cudaGetErrorString(err));

    cudaDeviceSynchronize();
    printf("*a = %x\n", *a);

    return 0;
}
