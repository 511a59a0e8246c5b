// A black-box GPU workload for `tune --cmd` on a machine with an NVIDIA GPU (issue 38's
// benchmark on hardware): each item is one launch of a kernel whose speed follows the GPU's
// clocks by a shape of its own, and the command prints trtexec's summary lines
// (`--throughput-from trtexec`), as benchmarks/blackbox_cmd.py does on a simulated board.
//
//   nvcc -O2 -o fma_cmd benchmarks/gpu/fma_cmd.cu
//   ./fma_cmd compute|memory SECONDS WARMUP_SECONDS
//
// compute: FMA chains in registers (the SM clock is all that matters); memory: a copy of
// 1 GiB through HBM (the memory clock first, the SM clock a little).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void fma_chain(float *out, int rounds) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f;
  for (int i = 0; i < rounds; ++i) {
    a = fmaf(a, b, c);
    c = fmaf(c, b, a);
  }
  if (a == 12345.0f) out[blockIdx.x] = a + c;  // never true: keeps the chain alive
}

__global__ void copy(const float4 *in, float4 *out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}

static double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "compute") && strcmp(argv[1], "memory"))) {
    fprintf(stderr, "usage: fma_cmd compute|memory SECONDS WARMUP_SECONDS\n");
    return 2;
  }
  bool compute = !strcmp(argv[1], "compute");
  double seconds = atof(argv[2]), warmup = atof(argv[3]);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  size_t n = (size_t)1 << 26;  // float4s: 1 GiB each way
  float *scratch = nullptr;
  float4 *in = nullptr, *out = nullptr;
  if (cudaMalloc(&scratch, sizeof(float) * sms * 8) != cudaSuccess ||
      (!compute && (cudaMalloc(&in, n * sizeof(float4)) != cudaSuccess ||
                    cudaMalloc(&out, n * sizeof(float4)) != cudaSuccess))) {
    fprintf(stderr, "fma_cmd: cudaMalloc failed\n");
    return 1;
  }
  auto item = [&]() {
    if (compute)
      fma_chain<<<sms * 8, 256>>>(scratch, 1 << 16);
    else
      copy<<<sms * 8, 256>>>(in, out, n);
  };
  double t = now_s();
  while (now_s() - t < warmup) {
    item();
    cudaDeviceSynchronize();
  }
  long items = 0;
  double t0 = now_s(), span = 0;
  while ((span = now_s() - t0) < seconds) {
    item();
    cudaDeviceSynchronize();
    ++items;
  }
  span = now_s() - t0;
  if (cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "fma_cmd: a kernel failed\n");
    return 1;
  }
  printf("[I] Timing trace has %ld queries over %.6f s\n", items, span);
  printf("[I] Throughput: %.4f qps\n", items / span);
  printf("[I] Total Host Walltime: %.6f s\n", span);
  return 0;
}
