import { describe, expect, it } from 'vitest';
import { loadBinding } from '../src/binding';
import { nvmlCodeName } from '../src/errors';
import { ENCODING, NATIVE_EXPORT_NAMES } from '../src/native-binding';

describe('the native export table matches the TypeScript NativeBinding interface', () => {
  const binding = loadBinding();

  it('exports exactly the names NativeBinding declares, each a function', () => {
    expect(Object.keys(binding).sort()).toEqual([...NATIVE_EXPORT_NAMES].sort());
    for (const name of NATIVE_EXPORT_NAMES) expect(typeof binding[name]).toBe('function');
  });

  it('encodes snapshots with the layout snapshot-decode.ts reads', () => {
    expect(binding.encodingLayout()).toEqual({
      version: ENCODING.version,
      headerSlots: ENCODING.headerSlots,
      deviceSlots: ENCODING.device.slots,
      migSlots: ENCODING.mig.slots,
      errorSlots: ENCODING.errorSlots,
      processSlots: ENCODING.processSlots,
      memorySlots: ENCODING.memorySlots,
    });
  });

  it('names every NVML return code the same way on both sides', () => {
    for (let code = -2; code <= 1000; code++) expect(binding.codeName(code)).toBe(nvmlCodeName(code));
    expect(nvmlCodeName(15)).toBe('NVML_ERROR_GPU_IS_LOST');
    expect(nvmlCodeName(31)).toBe('NVML_ERROR_31');
  });

  it('searches the soname first, then the driver directories, never a CUDA stubs/ copy', () => {
    const candidates = binding.defaultLibraryCandidates();
    expect(candidates[0]).toBe('libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib64/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/local/nvidia/lib64/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/wsl/lib/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1');
    expect(candidates.every((c) => !c.includes('stubs') && c.endsWith('libnvidia-ml.so.1'))).toBe(true);
  });
});
