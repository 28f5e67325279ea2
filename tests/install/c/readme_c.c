/* The README's C example as a program: an installed weft found with find_package, linked through
 * libweft_c.so (weft::c) only. Exits non-zero when a call fails or a value is wrong. */
#include <stdio.h>

#include "weft/c_api.h"

int main(void) {
  const weft_device_t cpu = {1, 0};
  const int64_t shape[2] = {2, 3};
  const float av[6] = {1, 2, 3, 4, 5, 6};
  weft_array_t a = NULL, b = NULL, out[1] = {NULL};
  if (weft_array_from_host(av, sizeof av, shape, 2, WEFT_FLOAT32, cpu, &a) != 0 ||
      weft_array_zeros(shape, 2, WEFT_FLOAT32, cpu, &b) != 0) {
    fprintf(stderr, "%s\n", weft_last_error());
    return 1;
  }
  weft_array_t in[2] = {a, b};
  int n = 1;
  if (weft_invoke("elemwise_add", in, 2, NULL, NULL, 0, out, &n) != 0) {
    fprintf(stderr, "%s\n", weft_last_error());
    return 1;
  }
  float r[6];
  if (weft_array_to_host(out[0], r, sizeof r) != 0) {
    fprintf(stderr, "%s\n", weft_last_error());
    return 1;
  }
  for (int i = 0; i < 6; ++i) {
    if (r[i] != av[i]) {
      fprintf(stderr, "readme_c: element %d is %g, expected %g\n", i, r[i], av[i]);
      return 1;
    }
  }
  weft_array_free(out[0]);
  weft_array_free(a);
  weft_array_free(b);
  printf("readme_c: ok (weft %s, C ABI %u)\n", weft_version(), weft_abi_version());
  return weft_wait_all() == 0 ? 0 : 1;
}
