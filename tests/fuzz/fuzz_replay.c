/* SPDX-License-Identifier: Apache-2.0 */
/* A main() for the fuzz targets without libFuzzer: feeds every file named
 * on the command line (or found in a folder named there; a folder that
 * does not exist is skipped) to
 * LLVMFuzzerTestOneInput once. With it, the committed corpus is a
 * regression test with any compiler, in every build; under ASan/UBSan
 * (scripts/sanitize.sh) it replays the corpus with the sanitizers on. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *b = realloc(buf, cap *= 2);
      if (!b) {
        free(buf);
        buf = NULL;
      }
      buf = b;
    }
  }
  fclose(f);
  if (!buf) return 1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      printf("(no %s: nothing to replay there)\n", argv[i]);
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]);
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return 1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      if (n == cap) {
        cap = cap ? cap * 2 : 64;
        char **nn = realloc(names, cap * sizeof *nn);
        if (!nn) return 1;
        names = nn;
      }
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[n] = malloc(len);
      if (!names[n]) return 1;
      snprintf(names[n], len, "%s/%s", argv[i], e->d_name);
      n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t k = 0; k < n; k++) {
      bad += run_file(names[k]);
      files++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs, %d unreadable\n", files, bad);
  return bad != 0;
}
