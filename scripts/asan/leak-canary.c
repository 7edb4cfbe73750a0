/*
 * leak-canary.c: a deliberately leaking Node-API addon, for the sanitizer test run only (never
 * shipped). scripts/asan/run-asan-tests.mjs loads it under the same LD_PRELOAD, ASAN_OPTIONS and
 * suppressions as the real test run and checks that its leak is reported and attributed to our
 * code: proof that Node's own leaks are filtered without hiding ours.
 */
#include <node_api.h>
#include <stdlib.h>
#include <string.h>

static void *volatile g_sink;

/* leak(bytes): allocates and forgets `bytes` bytes (the pointer is dropped, so LSan sees a leak). */
static napi_value Leak(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t bytes = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &bytes) != napi_ok || bytes <= 0) bytes = 4243;
  char *p = malloc((size_t)bytes);
  if (p != NULL) memset(p, 0x5a, (size_t)bytes);
  g_sink = p;
  g_sink = NULL;
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "leak", NAPI_AUTO_LENGTH, Leak, NULL, &fn);
  napi_set_named_property(env, exports, "leak", fn);
  return exports;
}
