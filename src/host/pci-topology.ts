/**
 * Where a GPU sits on the host's PCI tree, read from sysfs: its NUMA node
 * (`bus/pci/devices/<addr>/numa_node`) and the chain of PCI bridges above it (the real path of
 * the device's sysfs directory runs from the host bridge through every root port and switch
 * port down to the device). The sysfs root is a parameter (GPUGATE_SYSFS_ROOT for the command)
 * so tests can lay out a host. What cannot be read is null, never a guess.
 */
import { readFileSync, realpathSync } from 'node:fs';
import * as path from 'node:path';

/** Environment variable naming the sysfs root (default /sys). */
export const SYSFS_ROOT_ENV = 'GPUGATE_SYSFS_ROOT';
/** Where sysfs is mounted on a normal host. */
export const DEFAULT_SYSFS_ROOT = '/sys';

/** One GPU's place on the PCI tree. */
export interface PciPlacement {
  /** The sysfs address, e.g. '0000:1b:00.0'. */
  address: string;
  /** The NUMA node the kernel reports; null when unknown (-1, absent or unreadable). */
  numaNode: number | null;
  /** The host bridge (root complex) it hangs off, e.g. 'pci0000:17'; null when the path is unreadable. */
  hostBridge: string | null;
  /** Addresses of the PCI bridges between the host bridge and the GPU, root port first. */
  upstream: string[];
}

const NVML_BUS_ID = /^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$/i;
const SYSFS_ADDRESS = /^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/;
const HOST_BRIDGE = /^pci[0-9a-f]{4,}:[0-9a-f]{2}$/;

/** NVML's bus id ('00000000:1B:00.0') as sysfs names the device ('0000:1b:00.0'); null when not a bus id. */
export function sysfsPciAddress(nvmlBusId: string): string | null {
  const match = NVML_BUS_ID.exec(nvmlBusId.trim());
  if (!match) return null;
  const domain = Number.parseInt(match[1]!, 16).toString(16).padStart(4, '0');
  return `${domain}:${match[2]!}:${match[3]!}.${match[4]!}`.toLowerCase();
}

function readNumaNode(deviceDir: string): number | null {
  try {
    const text = readFileSync(path.join(deviceDir, 'numa_node'), 'utf8').trim();
    if (!/^-?\d+$/.test(text)) return null;
    const node = Number(text);
    return node >= 0 ? node : null;
  } catch {
    return null;
  }
}

/** Where the GPU with this NVML bus id sits; null when sysfs has no such device. */
export function readPciPlacement(nvmlBusId: string, sysfsRoot: string = DEFAULT_SYSFS_ROOT): PciPlacement | null {
  const address = sysfsPciAddress(nvmlBusId);
  if (address === null) return null;
  const deviceDir = path.join(sysfsRoot, 'bus', 'pci', 'devices', address);
  let real: string;
  try {
    real = realpathSync(deviceDir);
  } catch {
    return null;
  }
  const parts = real.split(path.sep);
  const bridgeAt = parts.findIndex((part) => HOST_BRIDGE.test(part));
  const chain = bridgeAt === -1 ? [] : parts.slice(bridgeAt + 1).filter((part) => SYSFS_ADDRESS.test(part));
  const own = chain[chain.length - 1] === address;
  return {
    address,
    numaNode: readNumaNode(deviceDir),
    hostBridge: bridgeAt === -1 || !own ? null : parts[bridgeAt]!,
    upstream: own ? chain.slice(0, -1) : [],
  };
}
