/**
 * Who owns a holder, in words for people: `of vllm.service, user vllm, started 3 min ago`, or
 * `in pod 6a1f… container 3f2a9c1b7d4e (containerd), user 1000, started 2 h ago`. The failure
 * text of a GPU and the command's log lines use it; JSON carries the same facts whole.
 */

import type { ProcessOwner } from '../host/process-owner';
import { formatAge } from '../units';

/** How many characters of a container id people are shown (what `docker ps` prints). */
const SHORT_ID_CHARS = 12;

/** Where it lives: its pod and container, else its container, else its unit; null when none is known. */
function whereOf(owner: ProcessOwner): string | null {
  const { unit, userManagerUid, container, pod } = owner.location;
  const containerText = container === null ? null : `container ${container.id.slice(0, SHORT_ID_CHARS)}${container.runtime === null ? '' : ` (${container.runtime})`}`;
  if (pod !== null) return `in pod ${pod.uid}${containerText === null ? '' : ` ${containerText}`}`;
  if (containerText !== null) return `in ${containerText}`;
  if (unit === null) return null;
  return userManagerUid === null ? `of ${unit}` : `of ${unit} under user@${userManagerUid}.service`;
}

/**
 * `of vllm.service, user vllm, started 3 min ago`: where the holder lives, its user (the uid
 * when the passwd file does not name it), its age. Null when nothing is known (no owner read).
 */
export function describeOwner(owner: ProcessOwner | null | undefined): string | null {
  if (owner === null || owner === undefined) return null;
  const parts: string[] = [];
  const where = whereOf(owner);
  if (where !== null) parts.push(where);
  if (owner.user !== null) parts.push(`user ${owner.user}`);
  else if (owner.uid !== null) parts.push(`uid ${owner.uid}`);
  if (owner.ageMs !== null) parts.push(`started ${formatAge(owner.ageMs)} ago`);
  return parts.length === 0 ? null : parts.join(', ');
}
