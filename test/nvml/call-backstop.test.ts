import { afterEach, describe, expect, it, vi } from 'vitest';
import { CALL_BACKSTOP_SLACK_MS, withCallBackstop } from '../../src/nvml/call-backstop';
import { GPUGATE_TIMEOUT, NvmlError } from '../../src/nvml/nvml-error';
import { withBackstop } from '../../src/cli/nvml-session';
import { exitCodeForError } from '../../src/cli/exit-codes';

// The library's gate and the CLI race a session against one backstop, which ends a call that
// never settles with the one documented error: an NvmlError, GPUGATE_TIMEOUT (exit 69).
describe('the call backstop', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects a call that never settles with an NvmlError GPUGATE_TIMEOUT naming the call and the setting', async () => {
    vi.useFakeTimers();
    const never = new Promise<never>(() => undefined);
    const raced = withCallBackstop(never, 400, 'reading the GPUs', 'callTimeoutMs');
    const settled = raced.then(() => null, (error: unknown) => error);
    await vi.advanceTimersByTimeAsync(400 + CALL_BACKSTOP_SLACK_MS - 1);
    let early: unknown = 'pending';
    void Promise.race([settled, Promise.resolve('pending')]).then((value) => { early = value; });
    await vi.advanceTimersByTimeAsync(0);
    expect(early).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    const error = await settled;
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe(GPUGATE_TIMEOUT);
    expect((error as NvmlError).fn).toBe('reading the GPUs');
    expect((error as NvmlError).message).toBe('reading the GPUs: NVML did not answer within 400 ms (callTimeoutMs); the driver may be hung');
  });

  it('gives the CLI the same error, naming --nvml-timeout, and exit 69', async () => {
    vi.useFakeTimers();
    const settled = withBackstop(new Promise<never>(() => undefined), 1000, 'opening NVML').then(() => null, (error: unknown) => error);
    await vi.advanceTimersByTimeAsync(1000 + CALL_BACKSTOP_SLACK_MS);
    const error = await settled;
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe(GPUGATE_TIMEOUT);
    expect((error as NvmlError).message).toBe('opening NVML: NVML did not answer within 1000 ms (--nvml-timeout); the driver may be hung');
    expect(exitCodeForError(error)).toBe(69);
  });

  it('passes a call that settles in time through untouched', async () => {
    await expect(withCallBackstop(Promise.resolve(7), 400, 'reading the GPUs', 'callTimeoutMs')).resolves.toBe(7);
    const failure = new Error('its own failure');
    await expect(withCallBackstop(Promise.reject(failure), 400, 'reading the GPUs', 'callTimeoutMs')).rejects.toBe(failure);
  });
});
