/* SPDX-License-Identifier: Apache-2.0 */
/* Which ranks share an NVLink domain: the GPU fabric clique that NVML
 * reports (multi-node NVLink systems such as GB200 NVL72), else the host.
 * NVML is loaded at run time (the CUDA toolkit ships no nvml.h, and a
 * machine without it still gets host domains), so the few calls used are
 * declared here as NVML defines them. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nccl_tp.h"

typedef int nvml_return;
typedef void *nvml_device;
enum { NVML_OK = 0, NVML_FABRIC_COMPLETED = 3, NVML_UUID_BYTES = 16 };

/* nvmlGpuFabricInfo_t */
typedef struct nvml_fabric_info {
  unsigned char cluster_uuid[NVML_UUID_BYTES];
  nvml_return status;
  unsigned int clique_id;
  unsigned char state;
} nvml_fabric_info;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3u;
  return h;
}

#define FNV_START 0xcbf29ce484222325u
#define FABRIC_BIT ((uint64_t)1 << 63)

/* A function of lib into *fn (left NULL when lib lacks it): dlsym's
 * object pointer copied, as POSIX allows and ISO C cannot say. */
static void symbol(void *lib, const char *name, void *fn, size_t bytes) {
  void *p = dlsym(lib, name);
  if (p) memcpy(fn, &p, bytes);
}

/* The fabric clique of `device`, or false. */
static bool fabric_key(int device, uint64_t *key) {
  char bus[32];
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess)
    return false;
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  nvml_return (*init)(void) = NULL, (*shutdown)(void) = NULL;
  nvml_return (*by_bus)(const char *, nvml_device *) = NULL;
  nvml_return (*fabric)(nvml_device, nvml_fabric_info *) = NULL;
  symbol(lib, "nvmlInit_v2", &init, sizeof init);
  symbol(lib, "nvmlShutdown", &shutdown, sizeof shutdown);
  symbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", &by_bus, sizeof by_bus);
  symbol(lib, "nvmlDeviceGetGpuFabricInfo", &fabric, sizeof fabric);
  bool found = false;
  if (init && shutdown && by_bus && fabric && init() == NVML_OK) {
    nvml_device dev;
    nvml_fabric_info info;
    memset(&info, 0, sizeof info);
    if (by_bus(bus, &dev) == NVML_OK && fabric(dev, &info) == NVML_OK &&
        info.state == NVML_FABRIC_COMPLETED && info.status == NVML_OK) {
      static const unsigned char none[NVML_UUID_BYTES];
      if (memcmp(info.cluster_uuid, none, sizeof none) != 0) {
        uint64_t h = fnv1a(FNV_START, info.cluster_uuid, NVML_UUID_BYTES);
        *key = fnv1a(h, &info.clique_id, sizeof info.clique_id) | FABRIC_BIT;
        found = true;
      }
    }
    shutdown();
  }
  dlclose(lib);
  return found;
}

/* This machine: its kernel's boot id where readable (containers of one
 * machine have names of their own but share it), else its host name. */
static uint64_t host_key(void) {
  char id[256] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f || !fgets(id, sizeof id, f)) gethostname(id, sizeof id - 1);
  if (f) fclose(f);
  return fnv1a(FNV_START, id, strlen(id)) & ~FABRIC_BIT;
}

uint64_t nccl_domain_key(int device) {
  uint64_t key;
  return fabric_key(device, &key) ? key : host_key();
}
