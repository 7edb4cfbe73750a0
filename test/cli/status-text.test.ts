/**
 * The STATUS= line `systemctl status` shows during a wait: busy GPUs first (most memory used
 * leading), every busy GPU named, durations never rounded up.
 */
import { describe, expect, it } from 'vitest';
import { statusText, type PollView } from '../../src/cli/progress-reporter';
import type { GpuEvaluation } from '../../src/gate/wait';
import { fakeEvaluation, fakeGpuEvaluation, fakeHolder } from '../helpers/fake-evaluation';

const GiB = 1024 ** 3;

function gpu(index: number, usedGiB: number, ok: boolean): GpuEvaluation {
  return fakeGpuEvaluation({
    index,
    uuid: `GPU-${index}`,
    pciBusId: `00000000:${index + 10}:00.0`,
    memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: usedGiB * GiB, freeBytes: (96 - usedGiB) * GiB, version: 2 } as unknown as GpuEvaluation['memory'],
    neededFreeBytes: null,
    maxUsedBytes: null,
    stableForMs: 0,
    ok,
    reasons: ok ? [] : ['memory'],
    holders: index === 6 ? [fakeHolder({ pid: 4242, class: 'orphan', usedBytes: 88 * GiB, comm: 'VLLM::Worker_TP', cmdline: 'VLLM::Worker_TP6' })] : [],
    unattributedBytes: null,
    error: null,
  });
}

describe('statusText', () => {
  it('puts the GPU holding most memory first and names every busy GPU', () => {
    const view: PollView = fakeEvaluation(999.7, [0, 1, 2, 3, 4, 5, 6, 7].map((i) => gpu(i, i === 6 ? 88 : 2, false)), 3);
    const text = statusText(view, 240_000);
    expect(text).toMatch(/^waiting: GPU 6 memory 88GiB used held by 4242\/VLLM::Worker_TP6\/orphan; /);
    for (const index of [0, 1, 2, 3, 4, 5, 7]) expect(text).toMatch(new RegExp(`\\b${index}\\b`));
    expect(text).not.toMatch(/more/);
    expect(text).toMatch(/\(999ms\/4m\)$/);
  });

  it('leaves free GPUs out of the busy list', () => {
    const view: PollView = fakeEvaluation(1500, [gpu(0, 0, true), gpu(6, 88, false)], 3);
    expect(statusText(view)).toBe('waiting: GPU 6 memory 88GiB used held by 4242/VLLM::Worker_TP6/orphan (1.5s)');
  });
});
