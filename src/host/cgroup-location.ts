/**
 * Where a process lives, read from its cgroup path alone: the systemd unit (and the user manager
 * when it is a user unit), the container (docker, containerd, CRI-O, podman, under the systemd or
 * the cgroupfs driver) and the Kubernetes pod. The path forms are a table of patterns (data), so
 * a new runtime's form is one more row. Pure: no file is read here.
 */
import { unitOfCgroup } from './procfs';

/** The container runtimes whose cgroup path forms are known. */
export type ContainerRuntime = 'docker' | 'containerd' | 'cri-o' | 'podman';

/** A container a process runs in. */
export interface ContainerLocation {
  /** null when the path gives the id but not the runtime (kubelet's cgroupfs form: `/kubepods/…/pod<uid>/<id>`). */
  runtime: ContainerRuntime | null;
  /** The full container id (64 hex digits), as `docker ps --no-trunc` and `crictl ps` print it. */
  id: string;
}

/** Kubernetes' quality-of-service class, which names the slice a pod's cgroup is in. */
export type PodQosClass = 'guaranteed' | 'burstable' | 'besteffort';

/** A Kubernetes pod a process runs in. */
export interface PodLocation {
  /** The pod's metadata.uid (dashes restored where the systemd form writes `_`). */
  uid: string;
  qosClass: PodQosClass;
}

/** Everything a cgroup path tells about where a process lives. */
export interface CgroupLocation {
  /** The systemd unit: the last `.service` or `.scope` component (a container's scope included), or null. */
  unit: string | null;
  /** When the unit runs under a user's service manager (`user@UID.service`): that uid; null for a system unit. */
  userManagerUid: number | null;
  container: ContainerLocation | null;
  pod: PodLocation | null;
}

/** A pattern for one path component; `parent`, when given, must match the component right above it. */
interface ComponentPattern {
  component: RegExp;
  parent?: RegExp;
}

interface ContainerPattern extends ComponentPattern {
  /** Named group `id`: the container id. */
  runtime: ContainerRuntime | null;
}

const ID = '(?<id>[0-9a-f]{64})';

/** The container forms, innermost component first wins (a container in a container is the inner one). */
const CONTAINER_PATTERNS: readonly ContainerPattern[] = [
  { runtime: 'docker', component: new RegExp(`^docker-${ID}\\.scope$`) },
  { runtime: 'docker', parent: /^docker$/, component: new RegExp(`^${ID}$`) },
  { runtime: 'containerd', component: new RegExp(`^cri-containerd-${ID}\\.scope$`) },
  { runtime: 'cri-o', component: new RegExp(`^crio-${ID}(?:\\.scope)?$`) },
  { runtime: 'podman', component: new RegExp(`^libpod-${ID}(?:\\.scope)?$`) },
  { runtime: null, parent: /^pod[0-9a-f-]+$/, component: new RegExp(`^${ID}$`) },
];

interface PodPattern extends ComponentPattern {
  /** Named groups: `uid` (required), `qos` (absent: guaranteed, which has no slice of its own). */
  uidSeparator: '_' | '-';
}

const QOS = '(?<qos>burstable|besteffort)';

/** The pod forms: kubelet's systemd driver (`kubepods-burstable-pod<uid with _>.slice`) and its cgroupfs driver (`/kubepods/burstable/pod<uid>`). */
const POD_PATTERNS: readonly PodPattern[] = [
  { uidSeparator: '_', component: new RegExp(`^kubepods-${QOS}-pod(?<uid>[0-9a-f_]+)\\.slice$`) },
  { uidSeparator: '_', component: /^kubepods-pod(?<uid>[0-9a-f_]+)\.slice$/ },
  { uidSeparator: '-', parent: new RegExp(`^${QOS}$`), component: /^pod(?<uid>[0-9a-f-]+)$/ },
  { uidSeparator: '-', parent: /^kubepods$/, component: /^pod(?<uid>[0-9a-f-]+)$/ },
];

const USER_MANAGER = /^user@(?<uid>\d+)\.service$/;

/** The named groups of the innermost component that matches `pattern`, with its position. */
function innermost(parts: readonly string[], pattern: ComponentPattern): { at: number; groups: Record<string, string> } | null {
  for (let at = parts.length - 1; at >= 0; at -= 1) {
    const match = pattern.component.exec(parts[at]!);
    if (match === null) continue;
    if (pattern.parent !== undefined && (at === 0 || !pattern.parent.test(parts[at - 1]!))) continue;
    const groups: Record<string, string> = { ...(match.groups ?? {}) };
    if (pattern.parent !== undefined) Object.assign(groups, pattern.parent.exec(parts[at - 1]!)?.groups ?? {});
    return { at, groups };
  }
  return null;
}

function containerOf(parts: readonly string[]): ContainerLocation | null {
  let best: { at: number; location: ContainerLocation } | null = null;
  for (const pattern of CONTAINER_PATTERNS) {
    const found = innermost(parts, pattern);
    if (found !== null && (best === null || found.at > best.at)) best = { at: found.at, location: { runtime: pattern.runtime, id: found.groups['id']! } };
  }
  return best?.location ?? null;
}

function podOf(parts: readonly string[]): PodLocation | null {
  for (const pattern of POD_PATTERNS) {
    const found = innermost(parts, pattern);
    if (found === null) continue;
    const uid = pattern.uidSeparator === '_' ? found.groups['uid']!.replace(/_/g, '-') : found.groups['uid']!;
    return { uid, qosClass: (found.groups['qos'] as PodQosClass | undefined) ?? 'guaranteed' };
  }
  return null;
}

/** The uid of the user manager (`user@UID.service`) the unit is below, or null. */
function userManagerOf(parts: readonly string[], unit: string | null): number | null {
  if (unit === null) return null;
  const unitAt = parts.lastIndexOf(unit);
  for (let at = unitAt - 1; at >= 0; at -= 1) {
    const match = USER_MANAGER.exec(parts[at]!);
    if (match !== null) return Number(match.groups!['uid']);
  }
  return null;
}

/** Where a process with this cgroup path (as /proc/PID/cgroup shows it) lives; all null for null or the root. */
export function cgroupLocation(cgroupPath: string | null): CgroupLocation {
  const parts = (cgroupPath ?? '').split('/').filter((part) => part !== '');
  const unit = unitOfCgroup(cgroupPath);
  return { unit, userManagerUid: userManagerOf(parts, unit), container: containerOf(parts), pod: podOf(parts) };
}
