/*
 * lsan-hook.c: a tiny Node-API addon for `npm run test:asan` only (never shipped): check() runs
 * LeakSanitizer's recoverable leak check now. The run sets leak_check_at_exit=0, so a leak never
 * rewrites a process's exit status (tests assert those), and each Node process instead calls check()
 * from its 'exit' event (leak-check-at-exit.cjs); the reports go to the log files that
 * run-asan-tests.mjs reads. The symbol comes from the preloaded libasan; without it, check() is -1.
 */
#include <node_api.h>

extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static napi_value Check(napi_env env, napi_callback_info info) {
  (void)info;
  int result = -1;
  if (__lsan_do_recoverable_leak_check != 0) result = __lsan_do_recoverable_leak_check();
  napi_value out;
  napi_create_int32(env, result, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "check", NAPI_AUTO_LENGTH, Check, NULL, &fn);
  napi_set_named_property(env, exports, "check", fn);
  return exports;
}
