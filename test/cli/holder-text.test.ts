/**
 * The owner of a holder in words: where it lives (pod and container, container, unit, user unit),
 * its user or bare uid, its age at a person's precision; the command line cut for a table with
 * its control characters escaped; and the failure line that names each holder's owner.
 */
import { describe, expect, it } from 'vitest';
import type { ProcessOwner } from '../../src/host/process-owner';
import { cgroupLocation } from '../../src/host/cgroup-location';
import { describeGpuFailure } from '../../src/gate/failure-text';
import { fakeGpuEvaluation, fakeHolder } from '../helpers/fake-evaluation';
import { describeOwner, formatAge, shortCommand } from '../../src/cli/holder-text';

const ID = '3f2a9c1b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8';
const POD = '6a1f0b7c-2d3e-4f5a-8b9c-0d1e2f3a4b5c';

function owner(cgroup: string | null, fields: Partial<ProcessOwner> = {}): ProcessOwner {
  return { uid: 998, user: 'vllm', startedAt: 0, ageMs: 180_000, argv: ['VLLM::Worker_TP6'], location: cgroupLocation(cgroup), ...fields };
}

describe('describeOwner', () => {
  it.each([
    ['/system.slice/vllm.service', {}, 'of vllm.service, user vllm, started 3 min ago'],
    ['/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service', { uid: 1000, user: 'alice' }, 'of jupyter.service under user@1000.service, user alice, started 3 min ago'],
    [`/system.slice/docker-${ID}.scope`, { uid: 0, user: 'root' }, 'in container 3f2a9c1b7d4e (docker), user root, started 3 min ago'],
    [`/kubepods/burstable/pod${POD}/${ID}`, { uid: 1000, user: null }, `in pod ${POD} container 3f2a9c1b7d4e, uid 1000, started 3 min ago`],
    [`/kubepods.slice/kubepods-pod${POD.replace(/-/g, '_')}.slice`, { ageMs: null }, `in pod ${POD}, user vllm`],
    [null, { uid: null, user: null, ageMs: 42_000 }, 'started 42 s ago'],
  ] as Array<[string | null, Partial<ProcessOwner>, string]>)('%s', (cgroup, fields, expected) => {
    expect(describeOwner(owner(cgroup, fields))).toBe(expected);
  });

  it('says nothing when nothing is known', () => {
    expect(describeOwner(null)).toBeNull();
    expect(describeOwner(undefined)).toBeNull();
    expect(describeOwner(owner('/', { uid: null, user: null, ageMs: null }))).toBeNull();
  });
});

describe('formatAge', () => {
  it('counts seconds, minutes, hours up to two days, then days; never negative', () => {
    expect([0, 59_999, 60_000, 3_599_999, 3_600_000, 47 * 3_600_000, 48 * 3_600_000, 10 * 86_400_000, -5].map(formatAge))
      .toEqual(['0 s', '59 s', '1 min', '59 min', '1 h', '47 h', '2 days', '10 days', '0 s']);
  });
});

describe('shortCommand', () => {
  it('joins the arguments, cuts at the limit with an ellipsis (by character, not byte), escapes controls', () => {
    expect(shortCommand(['vllm', 'serve', 'M'])).toBe('vllm serve M');
    expect(shortCommand(['x'.repeat(70)], 10)).toBe(`${'x'.repeat(9)}…`);
    expect(shortCommand(['日本語のモデル名です'], 5)).toBe('日本語の…');
    expect(shortCommand(['\u001b]0;pwned\u0007VLLM'])).toBe('\\x1b]0;pwned\\x07VLLM');
    expect(shortCommand(null)).toBeNull();
    expect(shortCommand([])).toBeNull();
  });
});

describe('describeGpuFailure', () => {
  it('names the owner of each holder after its label', () => {
    const line = describeGpuFailure(fakeGpuEvaluation({
      index: 6, uuid: 'GPU-6', pciBusId: '00000000:9B:00.0', memory: { totalBytes: 96, usedBytes: 92, freeBytes: 4, reservedBytes: 0, source: 'v2' } as never,
      neededFreeBytes: null, maxUsedBytes: 1, stableForMs: 0, ok: false, reasons: ['memory'], unattributedBytes: 0, error: null,
      holders: [
        fakeHolder({ pid: 4242, class: 'orphan', usedBytes: 92, comm: 'VLLM::Worker_TP', cmdline: 'VLLM::Worker_TP6', owner: owner('/system.slice/vllm.service') }),
        fakeHolder({ pid: 4243, class: 'gone', usedBytes: 0, comm: null, cmdline: null, owner: null }),
      ],
    }));
    expect(line).toBe('GPU 6 (GPU-6): used 92B > allowed 1B; held by 4242/VLLM::Worker_TP6/orphan (of vllm.service, user vllm, started 3 min ago) 4243/?/gone');
  });
});
