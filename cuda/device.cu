// device.cu: what the CUDA runtime sees on this machine. Compiled only when
// the build found nvcc; used by registry.c and the binding's devices().
#include <cuda_runtime.h>

extern "C" int cnn_cuda_runtime_device_count(void)
{
    int count = 0;
    // No driver or no GPU: the runtime answers with an error; that means 0.
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error
        return 0;
    }
    return count;
}

// The name of device `index` into buf (len bytes); 0 on success.
extern "C" int cnn_cuda_runtime_device_name(int index, char *buf, int len)
{
    cudaDeviceProp prop;
    if (len < 1 || cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    int i = 0;
    for (; i < len - 1 && prop.name[i]; i++) buf[i] = prop.name[i];
    buf[i] = '\0';
    return 0;
}

// The compute capability of device `index` (7.5 for a T4, 8.0 for an A100,
// 9.0 for an H100) into *major and *minor; 0 on success, -1 (both 0)
// otherwise. TF32 tensor cores need 8.0 (cuda_common.cuh's tensor_cores).
extern "C" int cnn_cuda_runtime_device_capability(int index, int *major, int *minor)
{
    *major = *minor = 0;
    int hi = 0, lo = 0;
    if (cudaDeviceGetAttribute(&hi, cudaDevAttrComputeCapabilityMajor, index) != cudaSuccess ||
        cudaDeviceGetAttribute(&lo, cudaDevAttrComputeCapabilityMinor, index) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    *major = hi;
    *minor = lo;
    return 0;
}

// The CUDA driver's and runtime's versions (1000*major + 10*minor); 0 where
// unknown (no driver).
extern "C" void cnn_cuda_runtime_versions(int *driver, int *runtime)
{
    if (cudaDriverGetVersion(driver) != cudaSuccess) *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess) *runtime = 0;
    cudaGetLastError();
}

// Free and total bytes of the current device's memory; 0 on success.
extern "C" int cnn_cuda_runtime_memory(size_t *free_bytes, size_t *total_bytes)
{
    if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return 0;
}
