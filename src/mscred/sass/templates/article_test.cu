// The first article's test program: one thread writes a constant, the host prints it.
// Build: nvcc -arch=sm_90 -o test article_test.cu ; run: ./test  ->  *a = cc
// One change from the article: cudaMalloc + cudaMemcpy instead of cudaMallocManaged (the shared GPU machines
// ask for plain allocations); the kernel, and so the machine code the articles patch, is the same.
#include <stdio.h>

#ifndef VALUE
#define VALUE 0xcc
#endif

__global__ void test(int *a) {
    a[0] = VALUE;
}

int main(int argc, const char* argv[]) {
    cudaError_t err;
    int *a, host = 0x01;
    cudaMalloc(&a, sizeof(int));
    cudaMemcpy(a, &host, sizeof(int), cudaMemcpyHostToDevice);
    test<<<1, 1>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess)
        fprintf(stderr, "launch: %s\n", cudaGetErrorString(err));

    cudaMemcpy(&host, a, sizeof(int), cudaMemcpyDeviceToHost);
    printf("*a = %x\n", host);

    cudaFree(a);
    return 0;
}
