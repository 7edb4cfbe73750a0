/**
 * How `npm run test:asan` reads sanitizer logs: a leak belongs to gpugate when the first frame
 * above the allocator and the C/C++ runtime is in gpugate's code (even though Node frames lie
 * below it), Node's own heap leaks do not, and every sanitizer error line counts while summaries
 * and the leak banner do not. Log texts in the exact format GCC 12's libsanitizer writes.
 */
import { describe, expect, it } from 'vitest';
import { classifyLeak, parseSanitizerLog } from '../../scripts/asan/sanitizer-report.cjs';

const ROOT = '/src/gpugate';

const LOG = `
=================================================================
==4242==ERROR: LeakSanitizer: detected memory leaks

Direct leak of 96 byte(s) in 1 object(s) allocated from:
    #0 0x7f00 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95
    #1 0x7f01 in std::__cxx11::basic_string<char>::_M_create(unsigned long&, unsigned long) (/lib/x86_64-linux-gnu/libstdc++.so.6+0x14a4b1)
    #2 0x7f02 in gpugate::Session::Open(std::string const&) ${ROOT}/native/session.cc:88
    #3 0x7f03 in v8impl::(anonymous namespace)::FunctionCallbackWrapper::Invoke(v8::FunctionCallbackInfo<v8::Value> const&) (/usr/bin/node+0xb4f1c2)
    #4 0x7f04 in Builtins_CallApiCallback (/usr/bin/node+0x18ce3a1)

Indirect leak of 128 byte(s) in 1 object(s) allocated from:
    #0 0x7f10 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95
    #1 0x7f11 in v8::internal::Heap::InsertIntoRememberedSetFromCode(v8::internal::MemoryChunk*, unsigned long) (/usr/bin/node+0x10fba71)
    #2 0x7f12 in Builtins_RecordWriteSaveFP (/usr/bin/node+0x18c47ab)

Direct leak of 64 byte(s) in 1 object(s) allocated from:
    #0 0x7f20 in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69
    #1 0x7f21  (${ROOT}/build/Release/gpugate_sim.so+0x1234)
    #2 0x7f22  (/tmp/client+0x99)

SUMMARY: AddressSanitizer: 288 byte(s) leaked in 3 allocation(s).
`;

describe('sanitizer log reading', () => {
  it('attributes leaks by the first frame above the allocator and the runtime', () => {
    const { leaks, errors } = parseSanitizerLog(LOG, ROOT);
    expect(leaks.map((l) => [l.kind, l.bytes, l.owner])).toEqual([
      ['Direct', 96, 'ours'],
      ['Indirect', 128, 'foreign'],
      ['Direct', 64, 'ours'],
    ]);
    expect(errors).toEqual([]);
  });

  it('does not count dependencies under node_modules as ours, except the node-addon-api headers', () => {
    const dep = [`#0 0x1 in malloc x`, `#1 0x2 in f ${ROOT}/node_modules/some-dep/src/a.cc:1`, '#2 0x3 in node::Start() (/usr/bin/node+0x1)'];
    expect(classifyLeak(dep, ROOT)).toBe('foreign');
    const napi = [`#0 0x1 in malloc x`, `#1 0x2 in Napi::Foo ${ROOT}/node_modules/node-addon-api/napi-inl.h:10`];
    expect(classifyLeak(napi, ROOT)).toBe('ours');
    expect(classifyLeak(['#0 0x1 in malloc x', '#1 0x2 in std::vector (/lib/x86_64-linux-gnu/libstdc++.so.6+0x1)'], ROOT)).toBe('unknown');
  });

  it('counts a leak of the NVML helper process as ours, by its executable when no source line is known', () => {
    const unsymbolised = ['#0 0x1 in malloc x', '#1 0x2  (/tmp/gpugate-asan-x/build/Release/gpugate-nvml-helper+0x4a1f)'];
    expect(classifyLeak(unsymbolised, ROOT)).toBe('ours');
    // A program merely named like it elsewhere, as a test's stand-in: not by name alone.
    expect(classifyLeak(['#0 0x1 in malloc x', '#1 0x2  (/usr/local/bin/not-gpugate-nvml-helper-x+0x1)'], ROOT)).toBe('foreign');
  });

  it('reports ASan errors, sanitizer CHECK failures and UBSan runtime errors, not summaries', () => {
    const text = [
      '==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020 at pc 0x7f bp 0x7f sp 0x7f',
      'SUMMARY: AddressSanitizer: heap-use-after-free /src/gpugate/sim/json.cc:12 in parse',
      'AddressSanitizer: CHECK failed: asan_interceptors.cpp:320 "((__interception::real___cxa_throw)) != (0)" (0x0, 0x0) (tid=3)',
      '/src/gpugate/native/encode.cc:40:7: runtime error: signed integer overflow: 2147483647 + 1 cannot be represented in type int',
      '==2==ERROR: LeakSanitizer: detected memory leaks',
    ].join('\n');
    expect(parseSanitizerLog(text, ROOT).errors).toEqual([
      '==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020 at pc 0x7f bp 0x7f sp 0x7f',
      'AddressSanitizer: CHECK failed: asan_interceptors.cpp:320 "((__interception::real___cxa_throw)) != (0)" (0x0, 0x0) (tid=3)',
      '/src/gpugate/native/encode.cc:40:7: runtime error: signed integer overflow: 2147483647 + 1 cannot be represented in type int',
    ]);
  });
});
