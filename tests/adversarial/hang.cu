// ADVERSARIAL: never terminates
#include <cuda_fp16.h>
/*@launch
entry: adv_hang
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_hang(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  // the global timer never reads 0, but the compiler cannot know: a loop it may not remove
  unsigned long long now;
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now != 0ull);
}
