// out[i, :] = table[ids[i], :]: an embedding lookup. Each output row is a copy of one table row, so
// the copy goes in 16-byte chunks when dim % 8 == 0 and both tensors are 16-byte aligned, element by
// element otherwise. Grid-stride over output chunks in output order (coalesced writes); ids are
// trusted to lie in [0, vocab), as the task states.
#include <cuda_fp16.h>

/*@launch
entry: embedding_gather_f16
block: 256
grid: min(cdiv(n * dim, 2048), num_sms * 32)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(256)
embedding_gather_f16(const __half* __restrict__ table, const long long* __restrict__ ids, __half* __restrict__ out,
                     int vocab, int dim, int n) {
  const bool vec = dim % 8 == 0 && (((unsigned long long)table | (unsigned long long)out) & 15) == 0;
  const int per_row = vec ? dim / 8 : dim;
  const long long total = (long long)n * per_row;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < total; i += stride) {
    const long long row = i / per_row;
    const int j = (int)(i - row * per_row);
    const long long src = ids[row];
    if (vec)
      reinterpret_cast<uint4*>(out + row * dim)[j] = reinterpret_cast<const uint4*>(table + src * dim)[j];
    else
      out[row * dim + j] = table[src * dim + j];
  }
}
