/**
 * Where a process lives, from its cgroup path: the path forms systemd, docker, containerd, CRI-O,
 * podman and the kubelet (systemd and cgroupfs drivers) really write, as a table, and then real
 * cgroup directories of those forms with a real process moved in, read back through /proc.
 */
import { spawn } from 'node:child_process';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { cgroupLocation, type CgroupLocation } from '../../src/host/cgroup-location';
import { readProcess } from '../../src/host/procfs';
import { cgroupUnavailable, makeCgroup, type HierarchyName } from '../helpers/cgroups';
import { isAlive, until } from '../helpers/processes';

const ID = '3f2a9c1b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8';
const INNER = 'aa'.repeat(32);
const POD = '6a1f0b7c-2d3e-4f5a-8b9c-0d1e2f3a4b5c';
const POD_ = POD.replace(/-/g, '_');

const none: CgroupLocation = { unit: null, userManagerUid: null, container: null, pod: null };
const at = (fields: Partial<CgroupLocation>): CgroupLocation => ({ ...none, ...fields });

/** [cgroup path as /proc/PID/cgroup shows it, where that is]. */
const FORMS: Array<[string | null, CgroupLocation]> = [
  [null, none],
  ['/', none],
  ['/init.scope', at({ unit: 'init.scope' })],
  ['/system.slice/vllm.service', at({ unit: 'vllm.service' })],
  // ExecStartPre= under Delegate=yes, and a service's own sub-cgroup.
  ['/system.slice/vllm.service/.control', at({ unit: 'vllm.service' })],
  ['/system.slice/vllm.service/workers/tp6', at({ unit: 'vllm.service' })],
  ['/system.slice/system-serving.slice/serving@llama.service', at({ unit: 'serving@llama.service' })],
  ['/user.slice/user-1000.slice/session-3.scope', at({ unit: 'session-3.scope' })],
  ['/user.slice/user-1000.slice/user@1000.service', at({ unit: 'user@1000.service' })],
  ['/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service', at({ unit: 'jupyter.service', userManagerUid: 1000 })],
  ['/user.slice/user-1001.slice/user@1001.service/app.slice/app-gnome-code-4242.scope', at({ unit: 'app-gnome-code-4242.scope', userManagerUid: 1001 })],
  // docker: systemd driver, cgroupfs driver, docker in docker (the inner one).
  [`/system.slice/docker-${ID}.scope`, at({ unit: `docker-${ID}.scope`, container: { runtime: 'docker', id: ID } })],
  [`/docker/${ID}`, at({ container: { runtime: 'docker', id: ID } })],
  [`/docker/${ID}/docker/${INNER}`, at({ container: { runtime: 'docker', id: INNER } })],
  // the daemon itself is a service, not a container.
  ['/system.slice/docker.service', at({ unit: 'docker.service' })],
  [`/system.slice/containerd.service`, at({ unit: 'containerd.service' })],
  // podman: rootful, rootless (under the user's manager), cgroupfs; CRI-O's monitor is not the container.
  [`/machine.slice/libpod-${ID}.scope`, at({ unit: `libpod-${ID}.scope`, container: { runtime: 'podman', id: ID } })],
  [`/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-${ID}.scope/container`,
    at({ unit: `libpod-${ID}.scope`, userManagerUid: 1000, container: { runtime: 'podman', id: ID } })],
  [`/libpod_parent/libpod-${ID}`, at({ container: { runtime: 'podman', id: ID } })],
  [`/system.slice/crio-conmon-${ID}.scope`, at({ unit: `crio-conmon-${ID}.scope` })],
  // Kubernetes, systemd driver: burstable, besteffort, guaranteed (no QoS slice).
  [`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_}.slice/cri-containerd-${ID}.scope`,
    at({ unit: `cri-containerd-${ID}.scope`, container: { runtime: 'containerd', id: ID }, pod: { uid: POD, qosClass: 'burstable' } })],
  [`/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${POD_}.slice/crio-${ID}.scope`,
    at({ unit: `crio-${ID}.scope`, container: { runtime: 'cri-o', id: ID }, pod: { uid: POD, qosClass: 'besteffort' } })],
  [`/kubepods.slice/kubepods-pod${POD_}.slice/docker-${ID}.scope`,
    at({ unit: `docker-${ID}.scope`, container: { runtime: 'docker', id: ID }, pod: { uid: POD, qosClass: 'guaranteed' } })],
  // Kubernetes, cgroupfs driver: the runtime is not in the path (except CRI-O's prefix).
  [`/kubepods/burstable/pod${POD}/${ID}`, at({ container: { runtime: null, id: ID }, pod: { uid: POD, qosClass: 'burstable' } })],
  [`/kubepods/pod${POD}/${ID}`, at({ container: { runtime: null, id: ID }, pod: { uid: POD, qosClass: 'guaranteed' } })],
  [`/kubepods/besteffort/pod${POD}/crio-${ID}`, at({ container: { runtime: 'cri-o', id: ID }, pod: { uid: POD, qosClass: 'besteffort' } })],
  // The pod's own cgroup (no container yet), and a static pod (its uid is a 32-digit config hash).
  [`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_}.slice`, at({ pod: { uid: POD, qosClass: 'burstable' } })],
  ['/kubepods/burstable/pod0123456789abcdef0123456789abcdef', at({ pod: { uid: '0123456789abcdef0123456789abcdef', qosClass: 'burstable' } })],
  // Near misses: a short id, upper-case hex, a pod directory outside kubepods' QoS levels.
  ['/system.slice/docker-3f2a9c1b.scope', at({ unit: 'docker-3f2a9c1b.scope' })],
  [`/docker/${ID.toUpperCase()}`, none],
  [`/srv/pod${POD}/x`, none],
];

describe('cgroupLocation', () => {
  it.each(FORMS)('%s', (cgroupPath, expected) => {
    expect(cgroupLocation(cgroupPath)).toEqual(expected);
  });

  it('reads any path without throwing, and reports only full ids and pods from kubepods forms (property)', () => {
    const part = fc.oneof(
      fc.constantFrom('system.slice', 'kubepods', 'burstable', 'docker', 'user@1000.service', `docker-${ID}.scope`, ID, `pod${POD}`, `kubepods-pod${POD_}.slice`, 'x.service', '.control'),
      fc.string({ maxLength: 20 }),
    );
    fc.assert(fc.property(fc.array(part, { maxLength: 8 }), (parts) => {
      const location = cgroupLocation(`/${parts.join('/')}`);
      if (location.container !== null) expect(location.container.id).toMatch(/^[0-9a-f]{64}$/);
      if (location.pod !== null) expect(parts.some((p) => p.includes('pod'))).toBe(true);
      if (location.unit !== null) expect(location.unit).toMatch(/\.(service|scope)$/);
    }), { seed: 7, numRuns: 500 });
  });
});

/** Real cgroup directories: a process moved in reads back with its location. */
describe.each(['named', 'unified'] as HierarchyName[])('a real process in a real cgroup (%s hierarchy)', (hierarchy) => {
  const cleanups: Array<() => void> = [];
  const pids: number[] = [];
  afterEach(async () => {
    for (const pid of pids.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
      await until(`pid ${pid} to exit`, () => !isAlive(pid)).catch(() => {});
    }
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  });
  const unavailable = cgroupUnavailable(hierarchy);

  it.skipIf(unavailable !== null)(`reads the unit, container and pod of a process placed there${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, async () => {
    const suffix = `${process.pid.toString(16)}${Date.now().toString(16)}`.padStart(64, '0');
    const podUid = `00000000-0000-4000-8000-${String(process.pid).padStart(12, '0')}`;
    const cases: Array<[string, CgroupLocation]> = [
      [`/system.slice/gpugate-test-owner-${process.pid}.service`, at({ unit: `gpugate-test-owner-${process.pid}.service` })],
      [`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${podUid.replace(/-/g, '_')}.slice/cri-containerd-${suffix}.scope`,
        at({ unit: `cri-containerd-${suffix}.scope`, container: { runtime: 'containerd', id: suffix }, pod: { uid: podUid, qosClass: 'burstable' } })],
    ];
    for (const [cgroupPath, expected] of cases) {
      const group = makeCgroup(hierarchy, cgroupPath, cleanups);
      const child = spawn('sleep', ['60'], { stdio: 'ignore' });
      child.on('error', () => {});
      pids.push(child.pid!);
      group.join(child.pid!);
      const info = await readProcess(child.pid!);
      if (info.kind !== 'ok') throw new Error(`cannot read the sleeper: ${JSON.stringify(info)}`);
      expect(info.cgroup).toBe(cgroupPath);
      expect(cgroupLocation(info.cgroup)).toEqual(expected);
    }
  });
});
