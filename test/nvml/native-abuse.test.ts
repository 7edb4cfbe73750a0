import { describe, expect, it } from 'vitest';
import { loadBinding } from '../../src/nvml/binding';
import type { NativeBinding, NativeSessionHandle } from '../../src/nvml/native-binding';
import { bundledScenario, freshSimulator, useScenario } from '../helpers/session-helpers';

// Wrong types and wrong handles must throw TypeErrors naming the argument, never crash.
const binding = loadBinding() as unknown as Record<keyof NativeBinding, (...args: unknown[]) => unknown>;
const fake = {} as NativeSessionHandle;

describe('native argument abuse', () => {
  it('rejects anything but a session handle', () => {
    for (const name of ['open', 'snapshot', 'snapshotSync', 'readMemory', 'close', 'abandon', 'currentCall'] as const) {
      for (const handle of [undefined, null, 42, 'x', {}, fake, Buffer.alloc(8)]) {
        expect(() => binding[name](handle), `${name}(${String(handle)})`).toThrow(
          /argument 'handle' must be a session handle/,
        );
      }
    }
  });

  it('checks the other arguments by name', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const b = loadBinding();
    const handle = b.createSession();
    expect(() => binding.open(handle, 5)).toThrow(/argument 'libraryPath' must be a string or null/);
    await b.open(handle, freshSimulator());
    expect(() => b.open(handle, null)).toThrow(/open\(\) may be called once/);
    expect(() => binding.snapshot(handle, 'yes')).toThrow(/argument 'processes' must be a boolean/);
    expect(() => binding.snapshot(handle, true, 1)).toThrow(/argument 'memoryOnly' must be a boolean/);
    expect(() => binding.snapshot(handle, true, false, 'all')).toThrow(/argument 'devices' must be an array/);
    expect(() => binding.snapshot(handle, true, false, [0, 8])).toThrow(/'devices' entry 1 \(8\) is not a device index 0\.\.7/);
    expect(() => binding.snapshot(handle, true, false, [-1])).toThrow(RangeError);
    expect(() => binding.snapshot(handle, true, false, ['0'])).toThrow(RangeError);
    expect(() => binding.snapshotSync(handle, false, false, null, 'soon')).toThrow(/'lockTimeoutMs' must be a number/);
    // No default deadline on the native side: the session always passes its own.
    expect(() => binding.snapshotSync(handle, false, false, null)).toThrow(/'lockTimeoutMs' must be a number/);
    expect(() => binding.readMemory(handle, new Float64Array(40))).toThrow(/'lockTimeoutMs' must be a number/);
    expect(() => binding.readMemory(handle, new Float32Array(40))).toThrow(/argument 'out' must be a Float64Array/);
    expect(() => binding.readMemory(handle, [1, 2])).toThrow(TypeError);
    expect(() => binding.readMemory(handle, new Float64Array(39))).toThrow(/39 elements; 40 are needed/);
    expect(() => binding.codeName('15')).toThrow(/argument 'code'/);
    expect(() => binding.sendNotify(1, 'READY=1')).toThrow(/argument 'socketPath'/);
    expect(() => binding.sendNotify('/run/x', undefined)).toThrow(/argument 'text'/);
    await b.close(handle);
    expect(() => b.snapshotSync(handle, false, false, null, 1000)).toThrow(/not open/);
    expect(() => b.readMemory(handle, new Float64Array(40), 1000)).toThrow(/not open/);
    await b.close(handle); // a second close resolves
  });
});
