// Utility kernels of the harness itself (hgemm/runtime.py Utilities), compiled once per process as a
// candidate whose spec names hgemm_spin; both entries are loaded from the one cubin.
/*@launch
entry: hgemm_spin
block: 1
grid: 1
@*/
extern "C" __global__ void hgemm_spin(unsigned long long ns) {
  // Holds the stream while the host enqueues the launches to be timed, so that they run
  // back to back and the measurement contains no host dispatch gaps.
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
extern "C" __global__ void hgemm_scrub_smem(unsigned int words) {
  // Fills the shared memory of every SM with NaN bit patterns before a verification launch, so a
  // kernel that reads shared memory it never wrote sees NaNs instead of a previous run's tile.
  extern __shared__ unsigned int smem[];
  for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = 0x7e007e00u ^ (i & 0x00ff00ffu);
  __syncthreads();
  if (smem[(threadIdx.x * 7) % words] == 1u) smem[0] = 0u;  // keep the stores alive
}
