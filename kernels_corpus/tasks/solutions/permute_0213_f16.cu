// y[b, k, s, :] = x[b, s, k, :]: swap the sequence and head axes of a (batch, seq, heads, dim) tensor
// (the attention head split). Each output row of dim contiguous halves is a copy of one input row,
// so the copy goes in 16-byte chunks when dim % 8 == 0 and both pointers are 16-byte aligned, and
// element by element otherwise. Grid-stride over the chunks of the output, in output order, so
// writes are coalesced.
#include <cuda_fp16.h>

/*@launch
entry: permute_0213_f16
block: 256
grid: min(cdiv(batch * seq * heads * dim, 2048), num_sms * 32)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(256)
permute_0213_f16(const __half* __restrict__ x, __half* __restrict__ y, int batch, int seq, int heads, int dim) {
  const bool vec = dim % 8 == 0 && (((unsigned long long)x | (unsigned long long)y) & 15) == 0;
  const int per_row = vec ? dim / 8 : dim;
  const long long total = (long long)batch * heads * seq * per_row;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < total; i += stride) {
    const long long orow = i / per_row;  // = (b * heads + k) * seq + s
    const int j = (int)(i - orow * per_row);
    const long long s = orow % seq;
    const long long bk = orow / seq;
    const long long k = bk % heads, b = bk / heads;
    const long long irow = (b * seq + s) * heads + k;
    if (vec)
      reinterpret_cast<uint4*>(y + orow * dim)[j] = reinterpret_cast<const uint4*>(x + irow * dim)[j];
    else
      y[orow * dim + j] = x[irow * dim + j];
  }
}
